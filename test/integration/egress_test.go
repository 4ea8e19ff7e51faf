package integration

import (
	"context"
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
	"github.com/agent-sandbox/agent-sandbox/internal/egress"
	"github.com/agent-sandbox/agent-sandbox/internal/naming"
)

// Seed 002's egress modes on raw Sandboxes: the agents.x-k8s.io/egress annotations become one
// NetworkPolicy named after the Sandbox, owned by it, written before its pod.

const (
	egressKey = agentsv1alpha1.EgressAnnotation
	cidrsKey  = agentsv1alpha1.EgressCIDRsAnnotation
)

func (b *sandboxBuilder) withAnnotations(kv ...string) *sandboxBuilder {
	b.sb.Annotations = pairs(kv)
	return b
}

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
func egressConditionIs(t *testing.T, ns, name string, status metav1.ConditionStatus, reason, messagePrefix string) func() string {
	return func() string {
		c := meta.FindStatusCondition(getSandbox(t, ns, name).Status.Conditions, agentsv1alpha1.SandboxConditionEgressPolicy)
		switch {
		case reason == "" && c == nil:
			return ""
		case reason == "":
			return fmt.Sprintf("EgressPolicy condition %s/%s still there", c.Status, c.Reason)
		case c == nil:
			return "no EgressPolicy condition"
		case c.Status != status || c.Reason != reason || !strings.HasPrefix(c.Message, messagePrefix):
			return fmt.Sprintf("EgressPolicy=%s/%s %q, want %s/%s %q…", c.Status, c.Reason, c.Message, status, reason, messagePrefix)
		}
		return ""
	}
}

// policyIs checks that the Sandbox's policy exists with exactly the spec the mode makes and
// selects the Sandbox's pod.
func policyIs(t *testing.T, ns, name string, spec egress.Spec) func() string {
	return func() string {
		np := egressPolicyOf(ns, name)
		if msg := exists(np, true)(); msg != "" {
			return msg
		}
		sb := getSandbox(t, ns, name)
		want, _ := spec.PolicySpec(map[string]string{
			agentsv1alpha1.SandboxNameHashLabel: naming.NameHash(name), agentsv1alpha1.SandboxNameLabel: name})
		if !equality.Semantic.DeepEqual(np.Spec, want) {
			return fmt.Sprintf("policy spec %+v, want %+v", np.Spec, want)
		}
		if !metav1.IsControlledBy(np, sb) {
			return fmt.Sprintf("policy owners %v, want the Sandbox as controller", np.OwnerReferences)
		}
		if o := metav1.GetControllerOf(np); o == nil || o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion {
			return fmt.Sprintf("policy controller reference %+v, want blockOwnerDeletion", o)
		}
		pod := podOf(ns, name)
		if exists(pod, true)() == "" {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
				return fmt.Sprintf("policy selector %v does not select the pod (labels %v)", np.Spec.PodSelector, pod.Labels)
			}
		}
		return ""
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
		annotations []string
		spec        egress.Spec
	}{
		{"deny-all blocks all egress, DNS included", []string{egressKey, "deny-all"}, egress.Spec{Mode: egress.DenyAll}},
		{"restricted allows the CIDRs and DNS", []string{egressKey, "restricted", cidrsKey, "203.0.113.0/24, 198.51.100.7,2001:db8::/32"},
			egress.Spec{Mode: egress.Restricted, CIDRs: []string{"203.0.113.0/24", "198.51.100.7/32", "2001:db8::/32"}}},
		{"restricted without CIDRs allows DNS only", []string{egressKey, "restricted"}, egress.Spec{Mode: egress.Restricted}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("egress-%d", i)
			mark := controllerWrites.mark()
			aSandbox(ns, name).withAnnotations(tc.annotations...).create(t)
			waitForPod(t, ns, name)
			eventually(t, "policy matches the mode", policyIs(t, ns, name, tc.spec))
			eventually(t, "EgressPolicy=True", egressConditionIs(t, ns, name, metav1.ConditionTrue,
				agentsv1alpha1.ReasonEgressApplied, tc.spec.Summary()+": NetworkPolicy "+name))
			// The controller waits for each write's answer before the next, so a policy create
			// sent before the pod create existed before the pod.
			order := firstCreates(mark, ns)
			if p, q := indexOf(order, "networkpolicies"), indexOf(order, "pods"); p < 0 || q < 0 || p > q {
				t.Errorf("controller's first creates: %v; want networkpolicies before pods", order)
			}
			// Later reconciles (the pod becoming ready) leave a policy that matches alone.
			setPodStatus(t, podOf(ns, name), running("10.2.0.1"))
			eventually(t, "Ready=True", readyIs(t, ns, name, metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
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

func TestEgressAllowAllMakesNoPolicy(t *testing.T) {
	ns := newNamespace(t)
	aSandbox(ns, "open").withAnnotations(egressKey, "allow-all", cidrsKey, "10.0.0.0/8").create(t)
	waitForPod(t, ns, "open")
	eventually(t, "EgressPolicy=True allow-all", egressConditionIs(t, ns, "open", metav1.ConditionTrue, agentsv1alpha1.ReasonEgressApplied, "allow-all:"))
	if msg := exists(egressPolicyOf(ns, "open"), false)(); msg != "" {
		t.Error(msg)
	}
}

func TestSandboxWithoutEgressAnnotationsHasNoPolicyAndNoCondition(t *testing.T) {
	ns := newNamespace(t)
	aSandbox(ns, "plain").create(t)
	setPodStatus(t, waitForPod(t, ns, "plain"), running("10.1.0.1"))
	eventually(t, "Ready=True", readyIs(t, ns, "plain", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
	if msg := egressConditionIs(t, ns, "plain", "", "", "")(); msg != "" {
		t.Error(msg)
	}
	if msg := exists(egressPolicyOf(ns, "plain"), false)(); msg != "" {
		t.Error(msg)
	}
}

func TestEgressPolicyFollowsAnnotationChangesAndKeepsThePod(t *testing.T) {
	ns := newNamespace(t)
	aSandbox(ns, "mover").withAnnotations(egressKey, "deny-all").create(t)
	pod := waitForPod(t, ns, "mover")
	eventually(t, "deny-all policy", policyIs(t, ns, "mover", egress.Spec{Mode: egress.DenyAll}))

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
		{"to allow-all deletes the policy", map[string]*string{egressKey: str("allow-all"), cidrsKey: nil}, nil, "allow-all:"},
		{"back to deny-all makes it again", map[string]*string{egressKey: str("deny-all")}, &egress.Spec{Mode: egress.DenyAll}, "deny-all:"},
		{"removing the annotation deletes the policy", map[string]*string{egressKey: nil}, nil, ""},
	}
	for _, s := range steps {
		annotate(t, ns, "mover", s.patch)
		if s.spec != nil {
			eventually(t, s.name+": policy", policyIs(t, ns, "mover", *s.spec))
		} else {
			eventually(t, s.name+": policy gone", exists(egressPolicyOf(ns, "mover"), false))
		}
		if s.cond == "" {
			eventually(t, s.name+": no condition", egressConditionIs(t, ns, "mover", "", "", ""))
		} else {
			eventually(t, s.name+": condition", egressConditionIs(t, ns, "mover", metav1.ConditionTrue, agentsv1alpha1.ReasonEgressApplied, s.cond))
		}
	}
	now := podOf(ns, "mover")
	if msg := exists(now, true)(); msg != "" || now.UID != pod.UID {
		t.Errorf("pod replaced or gone across egress changes (%s; uid %s, was %s)", msg, now.UID, pod.UID)
	}
}

func TestInvalidEgressCreatesNoPodUntilFixed(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name        string
		annotations []string
		wantMsg     []string
	}{
		{"unknown mode", []string{egressKey, "none"}, []string{egressKey, `unknown egress mode "none"`, "allow-all, deny-all or restricted"}},
		{"bad CIDR", []string{egressKey, "restricted", cidrsKey, "10.0.0.0/8,10.1.2.3/8"}, []string{cidrsKey, `"10.1.2.3/8" has host bits set`}},
		{"CIDRs without a mode", []string{cidrsKey, "10.0.0.0/8"}, []string{egressKey + ": restricted"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("bad-%d", i)
			aSandbox(ns, name).withAnnotations(tc.annotations...).create(t)
			eventually(t, "Ready=False/InvalidEgress", readyIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonInvalidEgress))
			eventually(t, "EgressPolicy=False/InvalidEgress", egressConditionIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonInvalidEgress, "annotation "))
			c := meta.FindStatusCondition(getSandbox(t, ns, name).Status.Conditions, agentsv1alpha1.SandboxConditionReady)
			if !containsAll(c.Message, tc.wantMsg...) {
				t.Errorf("Ready message %q, want it to name %v", c.Message, tc.wantMsg)
			}
			eventually(t, "Warning event", warningNames(ns, "Sandbox", name, agentsv1alpha1.ReasonInvalidEgress, tc.wantMsg...))
			time.Sleep(300 * time.Millisecond) // let any wrongly created pod show up
			if msg := exists(podOf(ns, name), false)(); msg != "" {
				t.Fatalf("a pod was created despite invalid egress: %s", msg)
			}
			if msg := exists(egressPolicyOf(ns, name), false)(); msg != "" {
				t.Fatalf("a policy was created from invalid egress: %s", msg)
			}

			annotate(t, ns, name, map[string]*string{egressKey: str("restricted"), cidrsKey: str("10.0.0.0/8")})
			waitForPod(t, ns, name)
			eventually(t, "policy once fixed", policyIs(t, ns, name, egress.Spec{Mode: egress.Restricted, CIDRs: []string{"10.0.0.0/8"}}))
			eventually(t, "Ready no longer InvalidEgress", readyIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonPodPending))
		})
	}
}

func TestInvalidEgressOnARunningSandboxKeepsTheLastPolicyAndThePod(t *testing.T) {
	ns := newNamespace(t)
	aSandbox(ns, "steady").withAnnotations(egressKey, "deny-all").create(t)
	pod := waitForPod(t, ns, "steady")
	eventually(t, "deny-all policy", policyIs(t, ns, "steady", egress.Spec{Mode: egress.DenyAll}))

	annotate(t, ns, "steady", map[string]*string{egressKey: str("restricted"), cidrsKey: str("not-a-cidr")})
	eventually(t, "EgressPolicy=False/InvalidEgress", egressConditionIs(t, ns, "steady", metav1.ConditionFalse, agentsv1alpha1.ReasonInvalidEgress, "annotation "+cidrsKey))
	if msg := policyIs(t, ns, "steady", egress.Spec{Mode: egress.DenyAll})(); msg != "" {
		t.Errorf("bad input loosened the policy: %s", msg)
	}
	if now := podOf(ns, "steady"); exists(now, true)() != "" || now.UID != pod.UID {
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
	aSandbox(ns, "taken").withAnnotations(egressKey, "deny-all").create(t)
	eventually(t, "Ready=False/EgressPolicyConflict", readyIs(t, ns, "taken", metav1.ConditionFalse, agentsv1alpha1.ReasonEgressPolicyConflict))
	eventually(t, "Warning event", warningNames(ns, "Sandbox", "taken", agentsv1alpha1.ReasonEgressPolicyConflict, "NetworkPolicy taken", "not controlled by this Sandbox"))
	if msg := exists(podOf(ns, "taken"), false)(); msg != "" {
		t.Fatalf("a pod was created without its egress policy: %s", msg)
	}
	got := egressPolicyOf(ns, "taken")
	_ = k8s.Get(context.Background(), client.ObjectKeyFromObject(got), got)
	if len(got.OwnerReferences) != 0 || len(got.Spec.PolicyTypes) != 1 || got.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("someone else's policy was changed: %+v", got)
	}

	if err := k8s.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "our policy replaces it", policyIs(t, ns, "taken", egress.Spec{Mode: egress.DenyAll}))
	waitForPod(t, ns, "taken")
}

func TestEgressPolicyIsRestoredAndGoesWithTheSandbox(t *testing.T) {
	ns := newNamespace(t)
	sb := aSandbox(ns, "owned").withAnnotations(egressKey, "deny-all").create(t)
	waitForPod(t, ns, "owned")
	np := egressPolicyOf(ns, "owned")
	eventually(t, "policy", policyIs(t, ns, "owned", egress.Spec{Mode: egress.DenyAll}))

	// Edited or deleted behind the controller's back, it comes back as the mode says.
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(np), np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}} // allow everything
	if err := k8s.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	eventually(t, "edit undone", policyIs(t, ns, "owned", egress.Spec{Mode: egress.DenyAll}))
	uid := np.UID
	if err := k8s.Delete(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	eventually(t, "recreated", func() string {
		if msg := policyIs(t, ns, "owned", egress.Spec{Mode: egress.DenyAll})(); msg != "" {
			return msg
		}
		if got := egressPolicyOf(ns, "owned"); exists(got, true)() != "" || got.UID == uid {
			return "still the deleted policy"
		}
		return ""
	})

	if err := k8s.Delete(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "policy garbage-collected with the Sandbox", exists(egressPolicyOf(ns, "owned"), false))
}

func TestPausedSandboxKeepsFollowingEgress(t *testing.T) {
	ns := newNamespace(t)
	aSandbox(ns, "napper").withReplicas(0).withAnnotations(egressKey, "deny-all").create(t)
	eventually(t, "policy while paused", policyIs(t, ns, "napper", egress.Spec{Mode: egress.DenyAll}))
	annotate(t, ns, "napper", map[string]*string{egressKey: str("restricted"), cidrsKey: str("192.0.2.0/24")})
	eventually(t, "updated while paused", policyIs(t, ns, "napper", egress.Spec{Mode: egress.Restricted, CIDRs: []string{"192.0.2.0/24"}}))
	if msg := exists(podOf(ns, "napper"), false)(); msg != "" {
		t.Error(msg)
	}
}
