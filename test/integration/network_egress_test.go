package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// The agent harness's egress modes on raw Sandboxes (docs/integrations.md): the agents.x-k8s.io/egress annotations become one
// NetworkPolicy named after the Sandbox, owned by it, written before its pod.

const (
	egressKey = agentsv1alpha1.EgressAnnotation
	cidrsKey  = agentsv1alpha1.EgressCIDRsAnnotation
)

func egressPolicyOf(ns, name string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// annotate merge-patches the Sandbox's annotations; a nil value removes the key.
func annotate(t *testing.T, ns, name string, kv map[string]*string) {
	t.Helper()
	var parts []string
	for k, v := range kv {
		val := "null"
		if v != nil {
			val = fmt.Sprintf("%q", *v)
		}
		parts = append(parts, fmt.Sprintf("%q:%s", k, val))
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{`+strings.Join(parts, ",")+`}}}`))
	sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Patch(context.Background(), sb, patch); err != nil {
		t.Fatalf("annotating sandbox %s: %v", name, err)
	}
}

func str(s string) *string { return &s }

// egressConditionIs checks the EgressPolicy condition; reason "" means it must be absent.
func egressConditionIs(t *testing.T, ns, name string, status metav1.ConditionStatus, reason, messagePrefix string) func() error {
	return func() error {
		c := meta.FindStatusCondition(getSandbox(t, ns, name).Status.Conditions, agentsv1alpha1.SandboxConditionEgressPolicy)
		switch {
		case reason == "" && c == nil:
			return nil
		case reason == "":
			return fmt.Errorf("EgressPolicy condition %s/%s still there", c.Status, c.Reason)
		case c == nil:
			return errors.New("no EgressPolicy condition")
		case c.Status != status || c.Reason != reason || !strings.HasPrefix(c.Message, messagePrefix):
			return fmt.Errorf("EgressPolicy=%s/%s %q, want %s/%s %q…", c.Status, c.Reason, c.Message, status, reason, messagePrefix)
		}
		return nil
	}
}

// policyIs checks that the Sandbox's policy exists with exactly the spec the mode makes and
// selects the Sandbox's pod.
func policyIs(t *testing.T, ns, name string, spec egress.Spec) func() error {
	return func() error {
		np := egressPolicyOf(ns, name)
		if err := exists(np, true)(); err != nil {
			return err
		}
		sb := getSandbox(t, ns, name)
		want := egresspolicy.DefaultPeers().PolicySpec(map[string]string{
			agentsv1alpha1.SandboxNameHashLabel: agentsv1alpha1.NameHash(name), agentsv1alpha1.SandboxNameLabel: name},
			egresspolicy.Policy{Egress: &spec})
		if !equality.Semantic.DeepEqual(np.Spec, want) {
			return fmt.Errorf("policy spec %+v, want %+v", np.Spec, want)
		}
		if !metav1.IsControlledBy(np, sb) {
			return fmt.Errorf("policy owners %v, want the Sandbox as controller", np.OwnerReferences)
		}
		if o := metav1.GetControllerOf(np); o == nil || o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion {
			return fmt.Errorf("policy controller reference %+v, want blockOwnerDeletion", o)
		}
		pod := podOf(ns, name)
		if exists(pod, true)() == nil {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
				return fmt.Errorf("policy selector %v does not select the pod (labels %v)", np.Spec.PodSelector, pod.Labels)
			}
		}
		return nil
	}
}

// firstCreates is the order of the controller's first create of each kind in the namespace.
func firstCreates(mark int, ns string) []string {
	var kinds []string
	seen := map[string]bool{}
	for _, w := range controllerWrites.since(mark, ns) {
		if w.method != "POST" {
			continue
		}
		kind := w.path[strings.LastIndex(w.path, "/")+1:]
		if !seen[kind] {
			seen[kind] = true
			kinds = append(kinds, kind)
		}
	}
	return kinds
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func TestEgressPolicyIsInPlaceBeforeThePodForEachMode(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name        string
		annotations map[string]string
		spec        egress.Spec
	}{
		{"deny-all blocks all egress, DNS included", map[string]string{egressKey: "deny-all"}, egress.Spec{Mode: egress.DenyAll}},
		{"restricted allows the CIDRs and DNS", map[string]string{egressKey: "restricted", cidrsKey: "203.0.113.0/24, 198.51.100.7,2001:db8::/32"},
			egress.Spec{Mode: egress.Restricted, CIDRs: []string{"203.0.113.0/24", "198.51.100.7/32", "2001:db8::/32"}}},
		{"restricted without CIDRs allows DNS only", map[string]string{egressKey: "restricted"}, egress.Spec{Mode: egress.Restricted}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("egress-%d", i)
			mark := controllerWrites.mark()
			create(t, testwrap.MakeSandbox(ns, name).Annotations(tc.annotations).Obj())
			waitForPod(t, ns, name)
			testwrap.Eventually(t, "policy matches the mode", policyIs(t, ns, name, tc.spec))
			testwrap.Eventually(t, "EgressPolicy=True", egressConditionIs(t, ns, name, metav1.ConditionTrue,
				agentsv1alpha1.ReasonEgressApplied, tc.spec.Summary()+": NetworkPolicy "+name))
			// The controller waits for each write's answer before the next, so a policy create
			// sent before the pod create existed before the pod.
			order := firstCreates(mark, ns)
			if p, q := indexOf(order, "networkpolicies"), indexOf(order, "pods"); p < 0 || q < 0 || p > q {
				t.Errorf("controller's first creates: %v; want networkpolicies before pods", order)
			}
			// Later reconciles (the pod becoming ready) leave a policy that matches alone.
			setPodStatus(t, podOf(ns, name), running("10.2.0.1"))
			testwrap.Eventually(t, "Ready=True", readyIs(t, ns, name, metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
			var policyWrites []write
			for _, w := range controllerWrites.since(mark, ns) {
				if strings.Contains(w.path, "/networkpolicies") {
					policyWrites = append(policyWrites, w)
				}
			}
			if len(policyWrites) != 1 {
				t.Errorf("controller wrote the policy %d times (%v), want one create", len(policyWrites), policyWrites)
			}
		})
	}
}

func TestEgressAllowAllClosesOnlyLinkLocal(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "open").Annotations(map[string]string{egressKey: "allow-all", cidrsKey: "10.0.0.0/8"}).Obj())
	waitForPod(t, ns, "open")
	testwrap.Eventually(t, "EgressPolicy=True allow-all", egressConditionIs(t, ns, "open", metav1.ConditionTrue, agentsv1alpha1.ReasonEgressApplied, "allow-all:"))
	testwrap.Eventually(t, "allow-all policy", policyIs(t, ns, "open", egress.Spec{Mode: egress.AllowAll}))
}

// A raw Sandbox that asks for nothing is still reachable only from the router, and reaches
// everything but link-local addresses (the cloud's metadata server).
func TestSandboxWithoutEgressAnnotationsGetsTheDefaultPolicyAndNoCondition(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "plain").Obj())
	setPodStatus(t, waitForPod(t, ns, "plain"), running("10.1.0.1"))
	testwrap.Eventually(t, "Ready=True", readyIs(t, ns, "plain", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
	if err := egressConditionIs(t, ns, "plain", "", "", "")(); err != nil {
		t.Error(err)
	}
	testwrap.Eventually(t, "default policy", policyIs(t, ns, "plain", egress.Spec{Mode: egress.AllowAll}))
}

func TestEgressPolicyFollowsAnnotationChangesAndKeepsThePod(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "mover").Annotation(egressKey, "deny-all").Obj())
	pod := waitForPod(t, ns, "mover")
	testwrap.Eventually(t, "deny-all policy", policyIs(t, ns, "mover", egress.Spec{Mode: egress.DenyAll}))

	steps := []struct {
		name  string
		patch map[string]*string
		spec  *egress.Spec // nil: no policy
		cond  string       // EgressPolicy message prefix; "" for no condition
	}{
		{"to restricted", map[string]*string{egressKey: str("restricted"), cidrsKey: str("10.0.0.0/8")},
			&egress.Spec{Mode: egress.Restricted, CIDRs: []string{"10.0.0.0/8"}}, "restricted to 10.0.0.0/8:"},
		{"other CIDRs", map[string]*string{cidrsKey: str("192.0.2.0/24,10.0.0.0/8")},
			&egress.Spec{Mode: egress.Restricted, CIDRs: []string{"192.0.2.0/24", "10.0.0.0/8"}}, "restricted to 192.0.2.0/24,10.0.0.0/8:"},
		{"to allow-all closes link-local alone", map[string]*string{egressKey: str("allow-all"), cidrsKey: nil},
			&egress.Spec{Mode: egress.AllowAll}, "allow-all:"},
		{"back to deny-all makes it again", map[string]*string{egressKey: str("deny-all")}, &egress.Spec{Mode: egress.DenyAll}, "deny-all:"},
		{"removing the annotation leaves the default", map[string]*string{egressKey: nil}, &egress.Spec{Mode: egress.AllowAll}, ""},
	}
	for _, s := range steps {
		annotate(t, ns, "mover", s.patch)
		if s.spec != nil {
			testwrap.Eventually(t, s.name+": policy", policyIs(t, ns, "mover", *s.spec))
		} else {
			testwrap.Eventually(t, s.name+": policy gone", exists(egressPolicyOf(ns, "mover"), false))
		}
		if s.cond == "" {
			testwrap.Eventually(t, s.name+": no condition", egressConditionIs(t, ns, "mover", "", "", ""))
		} else {
			testwrap.Eventually(t, s.name+": condition", egressConditionIs(t, ns, "mover", metav1.ConditionTrue, agentsv1alpha1.ReasonEgressApplied, s.cond))
		}
	}
	now := podOf(ns, "mover")
	if err := exists(now, true)(); err != nil || now.UID != pod.UID {
		t.Errorf("pod replaced or gone across egress changes (%v; uid %s, was %s)", err, now.UID, pod.UID)
	}
}

func TestInvalidEgressCreatesNoPodUntilFixed(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name        string
		annotations map[string]string
		wantMsg     []string
	}{
		{"unknown mode", map[string]string{egressKey: "none"}, []string{egressKey, `unknown egress mode "none"`, "allow-all, deny-all or restricted"}},
		{"bad CIDR", map[string]string{egressKey: "restricted", cidrsKey: "10.0.0.0/8,10.1.2.3/8"}, []string{cidrsKey, `"10.1.2.3/8" has host bits set`}},
		{"CIDRs without a mode", map[string]string{cidrsKey: "10.0.0.0/8"}, []string{egressKey + ": restricted"}},
		{"the cloud metadata server", map[string]string{egressKey: "restricted", cidrsKey: "169.254.169.254"},
			[]string{cidrsKey, "egress CIDR 169.254.169.254/32 is link-local", "--egress-allowed-link-local"}},
		{"undeclarable ingress sources", map[string]string{agentsv1alpha1.IngressFromPodsAnnotation: "app in (ax"},
			[]string{agentsv1alpha1.IngressFromPodsAnnotation, "is not a label selector"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("bad-%d", i)
			create(t, testwrap.MakeSandbox(ns, name).Annotations(tc.annotations).Obj())
			testwrap.Eventually(t, "Ready=False/InvalidEgress", readyIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonInvalidEgress))
			testwrap.Eventually(t, "EgressPolicy=False/InvalidEgress", egressConditionIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonInvalidEgress, "annotation "))
			c := meta.FindStatusCondition(getSandbox(t, ns, name).Status.Conditions, agentsv1alpha1.SandboxConditionReady)
			if !containsAll(c.Message, tc.wantMsg...) {
				t.Errorf("Ready message %q, want it to name %v", c.Message, tc.wantMsg)
			}
			testwrap.Eventually(t, "Warning event", warningNames(ns, "Sandbox", name, agentsv1alpha1.ReasonInvalidEgress, tc.wantMsg...))
			time.Sleep(300 * time.Millisecond) // let any wrongly created pod show up
			if err := exists(podOf(ns, name), false)(); err != nil {
				t.Fatalf("a pod was created despite invalid egress: %s", err)
			}
			if err := exists(egressPolicyOf(ns, name), false)(); err != nil {
				t.Fatalf("a policy was created from invalid egress: %s", err)
			}

			annotate(t, ns, name, map[string]*string{egressKey: str("restricted"), cidrsKey: str("10.0.0.0/8"),
				agentsv1alpha1.IngressFromPodsAnnotation: nil})
			waitForPod(t, ns, name)
			testwrap.Eventually(t, "policy once fixed", policyIs(t, ns, name, egress.Spec{Mode: egress.Restricted, CIDRs: []string{"10.0.0.0/8"}}))
			testwrap.Eventually(t, "Ready no longer InvalidEgress", readyIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonPodPending))
		})
	}
}

func TestInvalidEgressOnARunningSandboxKeepsTheLastPolicyAndThePod(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "steady").Annotation(egressKey, "deny-all").Obj())
	pod := waitForPod(t, ns, "steady")
	testwrap.Eventually(t, "deny-all policy", policyIs(t, ns, "steady", egress.Spec{Mode: egress.DenyAll}))

	annotate(t, ns, "steady", map[string]*string{egressKey: str("restricted"), cidrsKey: str("not-a-cidr")})
	testwrap.Eventually(t, "EgressPolicy=False/InvalidEgress", egressConditionIs(t, ns, "steady", metav1.ConditionFalse, agentsv1alpha1.ReasonInvalidEgress, "annotation "+cidrsKey))
	if err := policyIs(t, ns, "steady", egress.Spec{Mode: egress.DenyAll})(); err != nil {
		t.Errorf("bad input loosened the policy: %s", err)
	}
	if now := podOf(ns, "steady"); exists(now, true)() != nil || now.UID != pod.UID {
		t.Error("bad input on a running sandbox touched its pod")
	}
}

func TestEgressPolicyNameTakenBySomeoneElse(t *testing.T) {
	ns := newNamespace(t)
	theirs := egressPolicyOf(ns, "taken")
	theirs.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	if err := k8s.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	create(t, testwrap.MakeSandbox(ns, "taken").Annotation(egressKey, "deny-all").Obj())
	testwrap.Eventually(t, "Ready=False/EgressPolicyConflict", readyIs(t, ns, "taken", metav1.ConditionFalse, agentsv1alpha1.ReasonEgressPolicyConflict))
	testwrap.Eventually(t, "Warning event", warningNames(ns, "Sandbox", "taken", agentsv1alpha1.ReasonEgressPolicyConflict, "NetworkPolicy taken", "not controlled by this Sandbox"))
	if err := exists(podOf(ns, "taken"), false)(); err != nil {
		t.Fatalf("a pod was created without its egress policy: %s", err)
	}
	got := egressPolicyOf(ns, "taken")
	_ = k8s.Get(context.Background(), client.ObjectKeyFromObject(got), got)
	if len(got.OwnerReferences) != 0 || len(got.Spec.PolicyTypes) != 1 || got.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("someone else's policy was changed: %+v", got)
	}

	if err := k8s.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "our policy replaces it", policyIs(t, ns, "taken", egress.Spec{Mode: egress.DenyAll}))
	waitForPod(t, ns, "taken")
}

func TestEgressPolicyIsRestoredAndGoesWithTheSandbox(t *testing.T) {
	ns := newNamespace(t)
	sb := create(t, testwrap.MakeSandbox(ns, "owned").Annotation(egressKey, "deny-all").Obj())
	waitForPod(t, ns, "owned")
	np := egressPolicyOf(ns, "owned")
	testwrap.Eventually(t, "policy", policyIs(t, ns, "owned", egress.Spec{Mode: egress.DenyAll}))

	// Edited or deleted behind the controller's back, it comes back as the mode says.
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(np), np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}} // allow everything
	if err := k8s.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "edit undone", policyIs(t, ns, "owned", egress.Spec{Mode: egress.DenyAll}))
	uid := np.UID
	if err := k8s.Delete(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "recreated", func() error {
		if err := policyIs(t, ns, "owned", egress.Spec{Mode: egress.DenyAll})(); err != nil {
			return err
		}
		if got := egressPolicyOf(ns, "owned"); exists(got, true)() != nil || got.UID == uid {
			return errors.New("still the deleted policy")
		}
		return nil
	})

	if err := k8s.Delete(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "policy garbage-collected with the Sandbox", exists(egressPolicyOf(ns, "owned"), false))
}

func TestPausedSandboxKeepsFollowingEgress(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "napper").Replicas(0).Annotation(egressKey, "deny-all").Obj())
	testwrap.Eventually(t, "policy while paused", policyIs(t, ns, "napper", egress.Spec{Mode: egress.DenyAll}))
	annotate(t, ns, "napper", map[string]*string{egressKey: str("restricted"), cidrsKey: str("192.0.2.0/24")})
	testwrap.Eventually(t, "updated while paused", policyIs(t, ns, "napper", egress.Spec{Mode: egress.Restricted, CIDRs: []string{"192.0.2.0/24"}}))
	if err := exists(podOf(ns, "napper"), false)(); err != nil {
		t.Error(err)
	}
}
