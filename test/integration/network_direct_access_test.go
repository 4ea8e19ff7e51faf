package integration

import (
	"fmt"
	"os"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// peer is the source of a connection: a pod's namespace and labels.
type peer struct {
	namespace string
	labels    map[string]string
}

// admitsIngress reads an ingress NetworkPolicy the way the API defines it — a connection is
// allowed when some rule matches both its port and its source — for the peers these tests use
// (pods, chosen by namespace and pod selectors). It answers what an enforcing cluster would do;
// the local cluster does not enforce NetworkPolicy yet.
func admitsIngress(t *testing.T, np *networkingv1.NetworkPolicy, from peer, port int32) bool {
	t.Helper()
	for _, rule := range np.Spec.Ingress {
		if !portListed(rule.Ports, port) {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, p := range rule.From {
			if p.IPBlock == nil && selects(t, p.NamespaceSelector, nsLabels(from.namespace), np.Namespace == from.namespace) &&
				selects(t, p.PodSelector, from.labels, true) {
				return true
			}
		}
	}
	return false
}

func portListed(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil || (p.Port.IntValue() == int(port)) {
			return true
		}
	}
	return false
}

// selects applies a selector; a nil one means ifNil (a nil namespaceSelector means the policy's
// own namespace, a nil podSelector every pod).
func selects(t *testing.T, sel *metav1.LabelSelector, set map[string]string, ifNil bool) bool {
	t.Helper()
	if sel == nil {
		return ifNil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return s.Matches(labels.Set(set))
}

func nsLabels(ns string) map[string]string {
	return map[string]string{"kubernetes.io/metadata.name": ns}
}

// The claim-per-conversation flow (docs/integrations.md) talks to its sandbox at podIP:8494 directly. The supported way under enforced policy
// is a template networkPolicy admitting the integrator's pods; config/samples carries one. The
// policy the controller makes from that sample selects the sandbox's pod and admits exactly the
// integrator's server on the agent's port, and the router, and nobody else.
func TestTemplateNetworkPolicyAdmitsTheIntegratorsPodsForDirectAccess(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	raw, err := os.ReadFile("../../config/samples/sandboxtemplate-direct-access.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &extv1alpha1.SandboxTemplate{}
	if err := yaml.UnmarshalStrict(raw, tmpl); err != nil {
		t.Fatalf("decoding the sample: %v", err)
	}
	tmpl.Namespace = ns
	mustCreateObj(t, tmpl, testwrap.MakeClaim(ns, "conv-1").Template(tmpl.Name).WarmPool("none").Obj())
	testwrap.Eventually(t, "claim Ready", claimReadyIs(t, ns, "conv-1", metav1.ConditionTrue, ""))
	pod := waitForPod(t, ns, "conv-1")
	np := policyOf(ns, tmpl.Name)
	testwrap.Eventually(t, "the template's NetworkPolicy", exists(np, true))

	if !selects(t, &np.Spec.PodSelector, pod.Labels, false) {
		t.Fatalf("policy podSelector %v does not select the sandbox pod (labels %v)", np.Spec.PodSelector, pod.Labels)
	}
	var ingress bool
	for _, pt := range np.Spec.PolicyTypes {
		ingress = ingress || pt == networkingv1.PolicyTypeIngress
	}
	if !ingress {
		t.Fatalf("policyTypes %v, want Ingress (default deny for everyone not listed)", np.Spec.PolicyTypes)
	}

	server := map[string]string{"app": "ax-server"}
	cases := []struct {
		name string
		from peer
		port int32
		want bool
	}{
		{"integrator's server on the agent port", peer{"agent-platform", server}, 8494, true},
		{"integrator's server on another port", peer{"agent-platform", server}, 8888, false},
		{"the router", peer{"agent-sandbox-system", map[string]string{"app": "sandbox-router"}}, 8888, true},
		{"another pod of the integrator's namespace", peer{"agent-platform", map[string]string{"app": "batch"}}, 8494, false},
		{"a server of the same name in another namespace", peer{"team-b", server}, 8494, false},
		{"a pod next to the sandbox", peer{ns, server}, 8494, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := admitsIngress(t, np, tc.from, tc.port); got != tc.want {
				t.Errorf("connection from %s/%v to port %d admitted=%v, want %v\npolicy ingress: %s",
					tc.from.namespace, tc.from.labels, tc.port, got, tc.want, fmt.Sprint(np.Spec.Ingress))
			}
		})
	}
}
