package sandbox

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/fqdnpolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

func withDomainsEnforced() rigOption { return func(o *Options) { o.EnforceDomains = true } }

// restrictedTo is restricted mode with the domain list (and fail-open when asked).
func restrictedTo(domains string, failOpen bool) map[string]string {
	a := map[string]string{agentsv1beta1.EgressAnnotation: agentsv1beta1.EgressRestricted, agentsv1beta1.EgressDomainsAnnotation: domains}
	if failOpen {
		a[agentsv1beta1.EgressDomainsFailOpenAnnotation] = "true"
	}
	return a
}

// domainPolicy is the Sandbox's CiliumNetworkPolicy, nil when there is none.
func (g *rig) domainPolicy() *unstructured.Unstructured {
	cnp := fqdnpolicy.Empty()
	if !g.get(EgressPolicyName(g.name), cnp) {
		return nil
	}
	return cnp
}

// Where names can be enforced the list becomes a CiliumNetworkPolicy beside the NetworkPolicy,
// before the pod; where they cannot, the pod waits unless the Sandbox fails open, and then runs
// under allow-all's policy.
func TestDomainListsDecideThePoliciesAndThePod(t *testing.T) {
	allowAll := egresspolicy.DefaultPeers().PolicySpec(map[string]string{}, egresspolicy.Policy{Egress: &egress.Spec{Mode: egress.AllowAll}}).Egress
	tests := []struct {
		name        string
		enforced    bool
		annotations map[string]string
		wantCNP     bool
		wantPod     bool
		wantEgress  string // EgressPolicy reason
		wantStatus  metav1.ConditionStatus
		wantAllow   bool // the NetworkPolicy allows what allow-all does
		wantEvents  []string
	}{
		{name: "Cilium: a CiliumNetworkPolicy, then the pod", enforced: true, annotations: restrictedTo("pypi.org,*.github.com", false),
			wantCNP: true, wantPod: true, wantEgress: agentsv1beta1.ReasonEgressApplied, wantStatus: metav1.ConditionTrue},
		{name: "no engine: no pod, told why", annotations: restrictedTo("pypi.org", false),
			wantEgress: agentsv1beta1.ReasonEgressDomainsUnenforceable, wantStatus: metav1.ConditionFalse,
			wantEvents: []string{"Warning " + agentsv1beta1.ReasonEgressDomainsUnenforceable}},
		{name: "no engine, fail-open: the pod runs under allow-all, said so", annotations: restrictedTo("pypi.org", true),
			wantPod: true, wantEgress: agentsv1beta1.ReasonEgressDomainsFailOpen, wantStatus: metav1.ConditionTrue, wantAllow: true},
		{name: "Cilium, fail-open: enforced like any list", enforced: true, annotations: restrictedTo("pypi.org", true),
			wantCNP: true, wantPod: true, wantEgress: agentsv1beta1.ReasonEgressApplied, wantStatus: metav1.ConditionTrue},
		{name: "Cilium, restricted without names: no CiliumNetworkPolicy", enforced: true,
			annotations: map[string]string{agentsv1beta1.EgressAnnotation: agentsv1beta1.EgressRestricted},
			wantPod:     true, wantEgress: agentsv1beta1.ReasonEgressApplied, wantStatus: metav1.ConditionTrue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []rigOption
			if tt.enforced {
				opts = append(opts, withDomainsEnforced())
			}
			g := newRig(t, []client.Object{aSandbox().Annotations(tt.annotations).Hub()}, opts...)
			g.reconcile()
			np := g.policy()
			if np == nil {
				t.Fatal("no NetworkPolicy: it is written whatever the engine")
			}
			if got := equality.Semantic.DeepEqual(np.Spec.Egress, allowAll); got != tt.wantAllow {
				t.Errorf("NetworkPolicy allows what allow-all does: %v, want %v (egress %+v)", got, tt.wantAllow, np.Spec.Egress)
			}
			cnp := g.domainPolicy()
			if (cnp != nil) != tt.wantCNP {
				t.Fatalf("CiliumNetworkPolicy exists: %v, want %v", cnp != nil, tt.wantCNP)
			}
			if cnp != nil {
				ownedBy(t, cnp)
			}
			if (g.pod() != nil) != tt.wantPod {
				t.Errorf("pod exists: %v, want %v", g.pod() != nil, tt.wantPod)
			}
			c := g.condition(agentsv1beta1.SandboxConditionEgressPolicy)
			if c == nil || c.Reason != tt.wantEgress || c.Status != tt.wantStatus {
				t.Fatalf("EgressPolicy condition %+v, want %s %s", c, tt.wantStatus, tt.wantEgress)
			}
			spec, _, _ := egress.FromAnnotations(tt.annotations)
			if c.Status == metav1.ConditionTrue && !spec.Applied(c.Message) {
				t.Errorf("condition message %q does not read as %q in force (the SDK's wait)", c.Message, spec.Summary())
			}
			if tt.wantCNP && !strings.Contains(c.Message, "CiliumNetworkPolicy "+testSB) {
				t.Errorf("condition message %q does not name the CiliumNetworkPolicy", c.Message)
			}
			if !tt.wantPod {
				g.wantReady(metav1.ConditionFalse, tt.wantEgress)
			}
			if got := g.eventReasons(); strings.Join(got, ";") != strings.Join(tt.wantEvents, ";") {
				t.Errorf("events %v, want %v", got, tt.wantEvents)
			}
		})
	}
}

// The list changes, the policy follows; without names it goes, and someone else's policy of the
// name is never touched and keeps the pod from being made.
func TestTheCiliumNetworkPolicyFollowsTheListAndIsNeverSomeoneElses(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Annotations(restrictedTo("pypi.org", false)).Hub()}, withDomainsEnforced())
	g.reconcile()
	sb := g.sandbox()
	g.update(sb, func() { sb.Annotations[agentsv1beta1.EgressDomainsAnnotation] = "pypi.org,files.pythonhosted.org" })
	g.reconcile()
	names, _, _ := unstructured.NestedSlice(g.domainPolicy().Object, "spec", "egress")
	if last := names[len(names)-1].(map[string]any)["toFQDNs"].([]any); len(last) != 2 {
		t.Errorf("toFQDNs after the list grew: %v, want 2 names", last)
	}
	sb = g.sandbox()
	g.update(sb, func() { delete(sb.Annotations, agentsv1beta1.EgressDomainsAnnotation) })
	g.reconcile()
	if g.domainPolicy() != nil {
		t.Error("the CiliumNetworkPolicy is still there after the list was removed")
	}

	theirs := fqdnpolicy.New(testNS, EgressPolicyName(testSB), nil, map[string]any{"endpointSelector": map[string]any{}})
	for _, hidden := range []bool{false, true} {
		g := newRig(t, []client.Object{aSandbox().Annotations(restrictedTo("pypi.org", false)).Hub(), theirs.DeepCopy()}, withDomainsEnforced())
		if hidden {
			g.hide(fqdnpolicy.GVK.Kind) // not in the cache yet: the create meets it
		}
		g.reconcile()
		if n := g.count("update", fqdnpolicy.GVK.Kind) + g.count("delete", fqdnpolicy.GVK.Kind); n != 0 {
			t.Errorf("hidden %v: %d writes to their policy, want none", hidden, n)
		}
		if g.pod() != nil {
			t.Errorf("hidden %v: a pod was made beside someone else's CiliumNetworkPolicy", hidden)
		}
		g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonEgressPolicyConflict)
	}
}

// A Sandbox made from a template that lists names answers for the list where the cluster
// cannot enforce it: no pod, unless the template fails open.
func TestATemplatesUnenforceableListKeepsItsSandboxesPodless(t *testing.T) {
	fromTemplate := func(tmplAnnotations map[string]string) []client.Object {
		tmpl := testwrap.MakeTemplate(testNS, "python").Annotations(tmplAnnotations)
		sb := aSandbox().Annotation(extv1beta1.TemplateRefAnnotation, "python").Label(extv1beta1.TemplateRefHashLabel, agentsv1beta1.NameHash("python"))
		return []client.Object{sb.Hub(), tmpl.Hub()}
	}
	list := map[string]string{agentsv1beta1.EgressDomainsAnnotation: "allowed.test"}
	open := map[string]string{agentsv1beta1.EgressDomainsAnnotation: "allowed.test", agentsv1beta1.EgressDomainsFailOpenAnnotation: "true"}
	tests := []struct {
		name     string
		objs     []client.Object
		enforced bool
		wantPod  bool
	}{
		{"no engine: no pod", fromTemplate(list), false, false},
		{"no engine, the template fails open: the pod runs", fromTemplate(open), false, true},
		{"Cilium: the pod runs (the template's policy opens the names)", fromTemplate(list), true, true},
		{"no list: the pod runs", fromTemplate(nil), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []rigOption
			if tt.enforced {
				opts = append(opts, withDomainsEnforced())
			}
			g := newRig(t, tt.objs, opts...)
			g.reconcile()
			if (g.pod() != nil) != tt.wantPod {
				t.Fatalf("pod exists: %v, want %v", g.pod() != nil, tt.wantPod)
			}
			if g.domainPolicy() != nil {
				t.Error("a template's Sandbox got a CiliumNetworkPolicy of its own; the template's is shared")
			}
			if !tt.wantPod {
				g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonEgressDomainsUnenforceable)
				if c := g.condition(agentsv1beta1.SandboxConditionEgressPolicy); c == nil || !strings.Contains(c.Message, `SandboxTemplate "python" lists egress domains`) {
					t.Errorf("EgressPolicy condition %+v, want one naming the template", c)
				}
			}
		})
	}
}
