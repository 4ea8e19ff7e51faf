package sandboxtemplate

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/fqdnpolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// A template's list replaces the default egress (the public internet) with DNS alone, so that
// only the CiliumNetworkPolicy opens names; the template's own egress rules stay beside it; and
// fail-open on a cluster that cannot enforce names adds allow-all's rule.
func TestADomainListReplacesTheDefaultEgress(t *testing.T) {
	peers := egresspolicy.DefaultPeers()
	dnsOnly := peers.EgressRules(egress.Spec{Mode: egress.Restricted})
	allowAll := peers.EgressRules(egress.Spec{Mode: egress.AllowAll})
	own := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24"}}}}
	plain := testwrap.MakeTemplate("ns", "t").Hub()
	custom := testwrap.MakeTemplate("ns", "t").NetworkPolicy(&extv1alpha1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{own}}).Hub()
	names := templateDomains{names: []string{"allowed.test"}}
	open := templateDomains{names: []string{"allowed.test"}, failOpen: true}
	tests := []struct {
		name     string
		enforced bool
		custom   bool
		domains  templateDomains
		want     []networkingv1.NetworkPolicyEgressRule
	}{
		{"no list: the public internet", true, false, templateDomains{}, defaultEgress()},
		{"a list: DNS alone", true, false, names, dnsOnly},
		{"a bad list: DNS alone", true, false, templateDomains{invalid: true}, dnsOnly},
		{"a list beside the template's own rules", true, true, names, append([]networkingv1.NetworkPolicyEgressRule{own}, dnsOnly...)},
		{"fail-open where names are enforced: DNS alone", true, false, open, dnsOnly},
		{"fail-open where names cannot be enforced: allow-all too", false, false, open, append(append([]networkingv1.NetworkPolicyEgressRule{}, dnsOnly...), allowAll...)},
		{"fail-closed where names cannot be enforced: DNS alone", false, false, names, dnsOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := plain
			if tt.custom {
				tmpl = custom
			}
			got := New(nil, Options{EnforceDomains: tt.enforced}).desiredSpec(tmpl, tt.domains).Egress
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("egress (-want +got):\n%s", d)
			}
		})
	}
}

// With Cilium the template's list becomes one CiliumNetworkPolicy of the template's policy name,
// controlled by it, selecting its Sandboxes' pods; without a list (or Unmanaged) it goes; someone
// else's is left alone. Where names cannot be enforced the author is told.
func TestReconcileTheTemplatesCiliumNetworkPolicy(t *testing.T) {
	s := newScheme(t)
	listed := testwrap.MakeTemplate("ns", "t").UID("tmpl-uid").Annotation(agentsv1beta1.EgressDomainsAnnotation, "allowed.test,*.allowed.test").Hub()
	unlisted := testwrap.MakeTemplate("ns", "t").UID("tmpl-uid").Hub()
	unmanaged := testwrap.MakeTemplate("ns", "t").UID("tmpl-uid").Annotation(agentsv1beta1.EgressDomainsAnnotation, "allowed.test").
		NetworkPolicyManagement(extv1alpha1.NetworkPolicyManagementUnmanaged).Hub()
	ours := func() client.Object {
		cnp := fqdnpolicy.New("ns", PolicyName("t"), nil, map[string]any{"endpointSelector": map[string]any{}})
		cnp.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxTemplate",
			Name: "t", UID: "tmpl-uid", Controller: ptr.To(true)}})
		return cnp
	}
	theirs := func() client.Object {
		return fqdnpolicy.New("ns", PolicyName("t"), nil, map[string]any{"endpointSelector": map[string]any{}})
	}
	tests := []struct {
		name      string
		enforced  bool
		objs      []client.Object
		wantNames int // toFQDNs entries of the policy; -1: no policy
		wantOwned bool
		wantEvent string
	}{
		{"a list: the policy", true, []client.Object{listed}, 2, true, ""},
		{"a stale policy is put right", true, []client.Object{listed, ours()}, 2, true, ""},
		{"no list: ours goes", true, []client.Object{unlisted, ours()}, -1, false, ""},
		{"Unmanaged: ours goes", true, []client.Object{unmanaged, ours()}, -1, false, ""},
		{"someone else's is left alone", true, []client.Object{listed, theirs()}, 0, false,
			"Warning NetworkPolicyConflict CiliumNetworkPolicy t-network-policy exists and is not owned by this template"},
		{"no engine: no policy, the author is told", false, []client.Object{listed}, -1, false,
			"Warning " + agentsv1beta1.ReasonEgressDomainsUnenforceable + " this cluster cannot enforce the egress domains"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(tt.objs...).Build()
			events := record.NewFakeRecorder(10)
			r := New(c, Options{Recorder: events, EnforceDomains: tt.enforced})
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "t"}}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			cnp := fqdnpolicy.Empty()
			err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: PolicyName("t")}, cnp)
			switch {
			case tt.wantNames < 0 && !apierrors.IsNotFound(err):
				t.Fatalf("CiliumNetworkPolicy %v (err %v), want none", cnp.Object["spec"], err)
			case tt.wantNames >= 0 && err != nil:
				t.Fatalf("CiliumNetworkPolicy: %v, want one", err)
			case tt.wantNames >= 0:
				if n := fqdnCount(cnp); n != tt.wantNames {
					t.Errorf("toFQDNs entries %d, want %d (spec %v)", n, tt.wantNames, cnp.Object["spec"])
				}
				owner := metav1.GetControllerOf(cnp)
				if owned := owner != nil && owner.UID == "tmpl-uid"; owned != tt.wantOwned {
					t.Errorf("controlled by the template %v, want %v", owned, tt.wantOwned)
				}
				if tt.wantOwned {
					sel, _, _ := unstructured.NestedStringMap(cnp.Object, "spec", "endpointSelector", "matchLabels")
					if d := cmp.Diff(selectTemplatePods(listed).MatchLabels, sel); d != "" {
						t.Errorf("endpointSelector (-want +got):\n%s", d)
					}
				}
			}
			close(events.Events)
			var got []string
			for e := range events.Events {
				got = append(got, e)
			}
			if (tt.wantEvent == "") != (len(got) == 0) || (tt.wantEvent != "" && !strings.HasPrefix(got[0], tt.wantEvent)) {
				t.Errorf("events %q, want one starting %q", got, tt.wantEvent)
			}
		})
	}
}

func fqdnCount(cnp *unstructured.Unstructured) int {
	rules, _, _ := unstructured.NestedSlice(cnp.Object, "spec", "egress")
	n := 0
	for _, r := range rules {
		if names, ok := r.(map[string]any)["toFQDNs"].([]any); ok {
			n += len(names)
		}
	}
	return n
}
