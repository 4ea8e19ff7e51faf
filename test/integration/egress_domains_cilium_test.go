package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/fqdnpolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxtemplate"
	"github.com/agent-sandbox/agent-sandbox/internal/manager"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// With the CiliumNetworkPolicy API served when the controller starts, a domain list becomes a
// CiliumNetworkPolicy beside the NetworkPolicy. The engine is found once, at start, so this runs
// on a control plane of its own with the CRD (testdata/ciliumnetworkpolicy-crd.yaml) installed
// before its controller starts.
func TestDomainListsBecomeCiliumNetworkPolicies(t *testing.T) {
	c := startCiliumControlPlane(t)
	const ns = "fqdn"
	createOn(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	dns := fqdnpolicy.DNS{Namespace: egresspolicy.DefaultPeers().DNSNamespace, PodLabels: egresspolicy.DefaultPeers().DNSPodLabels}

	// A raw Sandbox: its own policy, controlled by it, before its pod.
	raw := testwrap.MakeSandbox(ns, "raw").Annotations(map[string]string{
		egressKey: "restricted", cidrsKey: "10.0.0.0/8", domainsKey: "PyPI.org *.pythonhosted.org",
	}).Hub()
	createOn(t, c, raw)
	rawLabels := map[string]string{agentsv1beta1.SandboxNameHashLabel: agentsv1beta1.NameHash("raw"), agentsv1beta1.SandboxNameLabel: "raw"}
	testwrap.Eventually(t, "the raw Sandbox's CiliumNetworkPolicy", ciliumPolicyIs(c, ns, "raw", "Sandbox", "raw",
		fqdnpolicy.Spec(rawLabels, []string{"pypi.org", "*.pythonhosted.org"}, dns)))
	testwrap.Eventually(t, "the raw Sandbox's pod", func() error {
		return c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "raw"}, podOf(ns, "raw"))
	})
	testwrap.Eventually(t, "EgressPolicy=True naming both policies", func() error {
		sb := &agentsv1beta1.Sandbox{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "raw"}, sb); err != nil {
			return err
		}
		want := egress.Spec{Mode: egress.Restricted, CIDRs: []string{"10.0.0.0/8"}, Domains: []string{"pypi.org", "*.pythonhosted.org"}}.AppliedMessage("raw")
		for _, cond := range sb.Status.Conditions {
			if cond.Type == agentsv1beta1.SandboxConditionEgressPolicy && cond.Reason == agentsv1beta1.ReasonEgressApplied && cond.Message == want {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v, want EgressPolicy %q", sb.Status.Conditions, want)
	})

	// The list removed: the policy goes.
	sb := &agentsv1beta1.Sandbox{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "raw"}, sb); err != nil {
		t.Fatal(err)
	}
	delete(sb.Annotations, domainsKey)
	if err := c.Update(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "the raw Sandbox's CiliumNetworkPolicy gone with its list", ciliumPolicyGone(c, ns, "raw"))

	// A template: one policy for its Sandboxes' pods; its NetworkPolicy allows DNS alone, and a
	// claim's annotations add nothing.
	tmpl := testwrap.MakeTemplate(ns, "named").Annotation(domainsKey, "allowed.test,*.allowed.test").Hub()
	createOn(t, c, tmpl)
	claim := testwrap.MakeClaim(ns, "widen").Template("named").Obj()
	claim.Annotations = map[string]string{egressKey: "restricted", domainsKey: "evil.example"}
	createOn(t, c, claim)
	podsOfTemplate := map[string]string{extv1beta1.TemplateRefHashLabel: agentsv1beta1.NameHash("named")}
	testwrap.Eventually(t, "the template's CiliumNetworkPolicy", ciliumPolicyIs(c, ns, sandboxtemplate.PolicyName("named"),
		"SandboxTemplate", "named", fqdnpolicy.Spec(podsOfTemplate, []string{"allowed.test", "*.allowed.test"}, dns)))
	testwrap.Eventually(t, "the template's NetworkPolicy allows DNS alone",
		templateEgressIsOn(c, ns, "named", egresspolicy.DefaultPeers().EgressRules(egress.Spec{Mode: egress.Restricted})))
	testwrap.Eventually(t, "the claim's pod", func() error {
		return c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "widen"}, podOf(ns, "widen"))
	})
	if err := ciliumPolicyGone(c, ns, "widen")(); err != nil {
		t.Errorf("the claim's annotations made a policy of their own: %v", err)
	}
}

func createOn(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// startCiliumControlPlane starts an API server with the CiliumNetworkPolicy CRD, then a
// controller on it, both stopped when the test ends.
func startCiliumControlPlane(t *testing.T) client.Client {
	t.Helper()
	cp, err := testenv.Start(testenv.Options{ConversionWebhook: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	for _, o := range decodeObjects(t, mustRead(t, filepath.Join(repoRoot, "test/integration/testdata/ciliumnetworkpolicy-crd.yaml"))) {
		if err := cp.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "the API serves CiliumNetworkPolicy", func() error {
		if served, err := fqdnpolicy.Served(dc); err != nil || !served {
			return fmt.Errorf("served %v, %v", served, err)
		}
		return nil
	})
	startManagerOn(t, cp, manager.Options{EgressDomainsEngine: fqdnpolicy.EngineCilium})
	return cp.Client
}

// ciliumPolicyIs checks that the CiliumNetworkPolicy ns/name has spec and is controlled by the
// ownerKind named owner.
func ciliumPolicyIs(c client.Client, ns, name, ownerKind, owner string, spec map[string]any) func() error {
	return func() error {
		cnp := fqdnpolicy.Empty()
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cnp); err != nil {
			return err
		}
		if d := cmp.Diff(spec, cnp.Object["spec"]); d != "" {
			return fmt.Errorf("spec (-want +got):\n%s", d)
		}
		ref := metav1.GetControllerOf(cnp)
		if ref == nil || ref.Kind != ownerKind || ref.Name != owner || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			return fmt.Errorf("controller %+v, want %s %s blocking deletion", ref, ownerKind, owner)
		}
		return nil
	}
}

func ciliumPolicyGone(c client.Client, ns, name string) func() error {
	return func() error {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, fqdnpolicy.Empty())
		if err == nil {
			return fmt.Errorf("CiliumNetworkPolicy %s/%s exists", ns, name)
		}
		return client.IgnoreNotFound(err)
	}
}

// templateEgressIs checks the egress rules of the template's NetworkPolicy on the shared
// control plane; templateEgressIsOn on c's.
func templateEgressIs(ns, template string, want []networkingv1.NetworkPolicyEgressRule) func() error {
	return templateEgressIsOn(k8s, ns, template, want)
}

func templateEgressIsOn(c client.Client, ns, template string, want []networkingv1.NetworkPolicyEgressRule) func() error {
	return func() error {
		np := policyOf(ns, template)
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(np), np); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(np.Spec.Egress, want) {
			return fmt.Errorf("egress %+v, want %+v", np.Spec.Egress, want)
		}
		return nil
	}
}
