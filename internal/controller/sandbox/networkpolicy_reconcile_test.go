package sandbox

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// egressOf is the egress annotation set to mode.
func egressOf(mode string) map[string]string {
	return map[string]string{agentsv1beta1.EgressAnnotation: mode}
}

// The Sandbox's NetworkPolicy says what its annotations ask for; the EgressPolicy condition
// tells the user whether it is in force, and the pod runs only when a policy can be.
func TestEgressAnnotationsDecideThePolicyAndThePod(t *testing.T) {
	fromTemplate := func(allowed bool) []client.Object {
		tmpl := testwrap.MakeTemplate(testNS, "python")
		if allowed {
			tmpl = tmpl.Annotation(extv1beta1.SandboxEgressAnnotation, extv1beta1.SandboxEgressAllowed)
		}
		sb := aSandbox().Annotations(egressOf("deny-all")).
			Annotation(extv1beta1.TemplateRefAnnotation, "python").Label(extv1beta1.TemplateRefHashLabel, agentsv1beta1.NameHash("python"))
		return []client.Object{sb.Hub(), tmpl.Hub()}
	}
	tests := []struct {
		name       string
		objs       []client.Object
		wantPolicy bool
		wantPod    bool
		// wantEgress is the EgressPolicy condition's reason, "" when it must be absent.
		wantEgress string
		wantEvents []string
	}{
		{name: "a raw Sandbox asking nothing gets allow-all, no condition",
			objs: []client.Object{aSandbox().Hub()}, wantPolicy: true, wantPod: true},
		{name: "deny-all is applied",
			objs:       []client.Object{aSandbox().Annotations(egressOf("deny-all")).Hub()},
			wantPolicy: true, wantPod: true, wantEgress: agentsv1beta1.ReasonEgressApplied},
		{name: "an unknown mode keeps the pod from being made",
			objs:       []client.Object{aSandbox().Annotations(egressOf("some")).Hub()},
			wantEgress: agentsv1beta1.ReasonInvalidEgress, wantEvents: []string{"Warning " + agentsv1beta1.ReasonInvalidEgress}},
		{name: "a link-local CIDR no admin opened keeps the pod from being made",
			objs: []client.Object{aSandbox().Annotations(egressOf("restricted")).
				Annotation(agentsv1beta1.EgressCIDRsAnnotation, "169.254.169.254/32").Hub()},
			wantEgress: agentsv1beta1.ReasonInvalidEgress, wantEvents: []string{"Warning " + agentsv1beta1.ReasonInvalidEgress}},
		{name: "on a template's Sandbox whose template does not allow it, ignored; the pod runs",
			objs: fromTemplate(false), wantPolicy: true, wantPod: true, wantEgress: agentsv1beta1.ReasonEgressIgnored},
		{name: "on a template's Sandbox whose template allows it, applied",
			objs: fromTemplate(true), wantPolicy: true, wantPod: true, wantEgress: agentsv1beta1.ReasonEgressApplied},
		{name: "Unmanaged: no policy, the pod runs",
			objs:    []client.Object{aSandbox().Annotation(agentsv1beta1.NetworkPolicyManagementAnnotation, agentsv1beta1.NetworkPolicyUnmanaged).Hub()},
			wantPod: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, tt.objs)
			g.reconcile()
			np := g.policy()
			if (np != nil) != tt.wantPolicy {
				t.Fatalf("NetworkPolicy exists: %v, want %v", np != nil, tt.wantPolicy)
			}
			if np != nil {
				ownedBy(t, np)
			}
			if (g.pod() != nil) != tt.wantPod {
				t.Errorf("pod exists: %v, want %v", g.pod() != nil, tt.wantPod)
			}
			c := g.condition(agentsv1beta1.SandboxConditionEgressPolicy)
			switch {
			case tt.wantEgress == "" && c != nil:
				t.Errorf("EgressPolicy condition %+v, want none", c)
			case tt.wantEgress != "" && (c == nil || c.Reason != tt.wantEgress):
				t.Errorf("EgressPolicy condition %+v, want reason %s", c, tt.wantEgress)
			}
			if !tt.wantPod {
				g.wantReady(metav1.ConditionFalse, tt.wantEgress)
			}
			if got := g.eventReasons(); strings.Join(got, ";") != strings.Join(tt.wantEvents, ";") {
				t.Errorf("events %v, want %v", got, tt.wantEvents)
			}
			// A problem is told once, not on every pass.
			g.reconcile()
			if got := g.eventReasons(); len(got) != 0 {
				t.Errorf("second pass sent events %v, want none", got)
			}
		})
	}
}

// A NetworkPolicy of the Sandbox's name that it does not control is never changed nor
// deleted, and no pod runs until it is gone: the pod would run under someone else's rules.
func TestAPolicyOfSomeoneElseBlocksThePod(t *testing.T) {
	theirs := foreign(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: EgressPolicyName(testSB)}})
	for _, hidden := range []bool{false, true} {
		g := newRig(t, []client.Object{aSandbox().Hub(), theirs.DeepCopy()})
		if hidden {
			g.hide("NetworkPolicy") // not in the cache yet: the create meets it
		}
		g.reconcile()
		if n := g.count("update", "NetworkPolicy") + g.count("delete", "NetworkPolicy"); n != 0 {
			t.Errorf("hidden from the cache %v: %d writes to their policy, want none", hidden, n)
		}
		if g.pod() != nil {
			t.Errorf("hidden from the cache %v: a pod was made beside someone else's policy", hidden)
		}
		g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonEgressPolicyConflict)
	}
}

// Opting out (Unmanaged) removes the policy the controller made, never someone else's.
func TestUnmanagedDeletesOnlyOurPolicy(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Hub()})
	g.reconcile()
	sb := g.sandbox()
	g.update(sb, func() {
		metav1.SetMetaDataAnnotation(&sb.ObjectMeta, agentsv1beta1.NetworkPolicyManagementAnnotation, agentsv1beta1.NetworkPolicyUnmanaged)
	})
	g.reconcile()
	if g.policy() != nil {
		t.Error("the Sandbox's own policy is still there after it opted out")
	}

	theirs := foreign(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: EgressPolicyName(testSB)}})
	g = newRig(t, []client.Object{aSandbox().Annotation(agentsv1beta1.NetworkPolicyManagementAnnotation, agentsv1beta1.NetworkPolicyUnmanaged).Hub(), theirs})
	g.reconcile()
	if g.policy() == nil {
		t.Error("someone else's policy was deleted")
	}
}

// A policy edited by hand is put back; a write that conflicts is an error to retry, and the pod
// already running is not touched meanwhile.
func TestPolicyDriftIsPutBackAndAConflictRetried(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Annotations(egressOf("deny-all")).Hub()})
	g.reconcile()
	want := g.policy().Spec
	np := g.policy()
	g.update(np, func() { np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}} }) // allow everything

	g.refuse("update", "NetworkPolicy", conflict("NetworkPolicy"))
	if _, err := g.reconcileErr(); err == nil {
		t.Fatal("Reconcile = nil after the policy update conflicted, want an error to retry")
	}
	if n := g.count("delete", "Pod"); n != 0 {
		t.Errorf("the pod was deleted %d times over a policy conflict", n)
	}
	g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonReconcilerError)

	g.heal()
	g.reconcile()
	if d := cmp.Diff(want, g.policy().Spec); d != "" {
		t.Errorf("policy after the retry (-deny-all +got):\n%s", d)
	}
	if c := g.condition(agentsv1beta1.SandboxConditionEgressPolicy); c == nil || c.Reason != agentsv1beta1.ReasonEgressApplied {
		t.Errorf("EgressPolicy condition %+v, want %s", c, agentsv1beta1.ReasonEgressApplied)
	}
}

// A policy created a moment ago and not in the cache yet is not created again.
func TestAPolicyCreatedMomentsAgoIsNotCreatedAgain(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Hub()})
	g.hide("NetworkPolicy")
	g.reconcile()
	g.reconcile()
	if n := g.count("create", "NetworkPolicy"); n != 1 {
		t.Errorf("NetworkPolicy created %d times while the cache lagged, want 1", n)
	}
	if g.pod() == nil {
		t.Error("no pod although the policy exists")
	}
}
