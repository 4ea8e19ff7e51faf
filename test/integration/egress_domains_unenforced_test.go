package integration

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// The shared control plane of these tests has no CiliumNetworkPolicy API, so the controller
// found no engine for names at start (egress_domains_cilium_test.go runs one that did): a list
// is refused clearly, never silently allowed (docs/egress.md, "Domains").

// A raw Sandbox that lists names gets no pod and says why; with fail-open it runs under
// allow-all's policy and says that.
func TestARawSandboxsNamesWithoutAnEngineFailClosedUnlessItFailsOpen(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	names := map[string]string{egressKey: "restricted", cidrsKey: "10.0.0.0/8", domainsKey: "pypi.org"}
	open := map[string]string{egressKey: "restricted", domainsKey: "pypi.org", failOpenKey: "true"}
	mustCreateObj(t, testwrap.MakeSandbox(ns, "closed").Annotations(names).Obj(), testwrap.MakeSandbox(ns, "open").Annotations(open).Obj())

	testwrap.Eventually(t, "closed: Ready=False/EgressDomainsUnenforceable",
		readyIs(t, ns, "closed", metav1.ConditionFalse, agentsv1alpha1.ReasonEgressDomainsUnenforceable))
	testwrap.Eventually(t, "closed: EgressPolicy says so", egressConditionIs(t, ns, "closed", metav1.ConditionFalse,
		agentsv1alpha1.ReasonEgressDomainsUnenforceable, "annotation agents.x-k8s.io/egress-domains lists names, and this cluster cannot enforce them"))
	if err := exists(podOf(ns, "closed"), false)(); err != nil {
		t.Errorf("closed: %v; a pod runs whose names nothing enforces", err)
	}
	// Its NetworkPolicy is restricted mode's (never looser), ready for the day names can be enforced.
	testwrap.Eventually(t, "closed: restricted NetworkPolicy", sandboxPolicyIs(t, ns, "closed",
		egresspolicy.Policy{Egress: &egress.Spec{Mode: egress.Restricted, CIDRs: []string{"10.0.0.0/8"}}}))

	testwrap.Eventually(t, "open: ready", readyIs(t, ns, "open", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
	testwrap.Eventually(t, "open: EgressPolicy=True/EgressDomainsFailOpen", egressConditionIs(t, ns, "open", metav1.ConditionTrue,
		agentsv1alpha1.ReasonEgressDomainsFailOpen, "restricted to pypi.org (fail-open): this cluster cannot enforce domain names"))
	testwrap.Eventually(t, "open: allow-all NetworkPolicy", sandboxPolicyIs(t, ns, "open",
		egresspolicy.Policy{Egress: &egress.Spec{Mode: egress.AllowAll}}))

	// Removing the list lets the closed one run.
	annotate(t, ns, "closed", map[string]*string{domainsKey: nil})
	testwrap.Eventually(t, "closed, without its list: ready", readyIs(t, ns, "closed", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
}

// A template's list that cannot be enforced keeps its claims' Sandboxes podless; its
// NetworkPolicy opens DNS alone meanwhile.
func TestATemplatesNamesWithoutAnEngineKeepItsClaimsWaiting(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "named").Annotation(domainsKey, "allowed.test,*.allowed.test").Obj(),
		testwrap.MakeClaim(ns, "named-1").Template("named").Obj())
	testwrap.Eventually(t, "the claim's Sandbox", exists(&agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "named-1"}}, true))
	testwrap.Eventually(t, "the claim's Sandbox: Ready=False/EgressDomainsUnenforceable",
		readyIs(t, ns, "named-1", metav1.ConditionFalse, agentsv1alpha1.ReasonEgressDomainsUnenforceable))
	if err := exists(podOf(ns, "named-1"), false)(); err != nil {
		t.Errorf("%v; a pod runs whose template's names nothing enforces", err)
	}
	testwrap.Eventually(t, "the template's NetworkPolicy allows DNS alone", templateEgressIs(ns, "named",
		egresspolicy.DefaultPeers().EgressRules(egress.Spec{Mode: egress.Restricted})))
}

// A tenant's claim cannot add names to its Sandbox: claims carry no egress, so the annotation is
// not copied (were it copied, the Sandbox here would wait for an engine instead of running).
func TestAClaimsDomainAnnotationsNeverReachItsSandbox(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	ids := identitiesIn(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "plain").Obj())
	claim := testwrap.MakeClaim(ns, "widen").Template("plain").Obj()
	claim.Annotations = map[string]string{egressKey: "restricted", domainsKey: "evil.example", failOpenKey: "true"}
	if err := ids[asTenant].Create(context.Background(), claim); err != nil {
		t.Fatalf("the tenant creating its claim: %v", err)
	}
	testwrap.Eventually(t, "claim ready", claimReadyIs(t, ns, "widen", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
	sb := getSandbox(t, ns, "widen")
	for _, k := range []string{egressKey, domainsKey, failOpenKey} {
		if v, ok := sb.Annotations[k]; ok {
			t.Errorf("the claim's %s reached its Sandbox: %q", k, v)
		}
	}
	if err := egressConditionIs(t, ns, "widen", "", "", "")(); err != nil {
		t.Errorf("the Sandbox has an egress condition: %v", err)
	}
}
