package integration

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// sandboxPolicyIs checks the Sandbox's own NetworkPolicy against what pol makes of the
// default peers (the test control plane has no cluster DNS Service).
func sandboxPolicyIs(t *testing.T, ns, name string, pol egresspolicy.Policy) func() error {
	return func() error {
		np := egressPolicyOf(ns, name)
		if err := exists(np, true)(); err != nil {
			return err
		}
		want := egresspolicy.DefaultPeers().PolicySpec(map[string]string{
			agentsv1alpha1.SandboxNameHashLabel: agentsv1alpha1.NameHash(name), agentsv1alpha1.SandboxNameLabel: name}, pol)
		if !equality.Semantic.DeepEqual(np.Spec, want) {
			return fmt.Errorf("policy spec %+v, want %+v", np.Spec, want)
		}
		if !metav1.IsControlledBy(np, getSandbox(t, ns, name)) {
			return fmt.Errorf("policy owners %v, want the Sandbox as controller", np.OwnerReferences)
		}
		return nil
	}
}

// A claim's Sandbox is governed by its template's policy alone (which admits only the router)
// until it asks for more, and its egress annotations count only where the template's author
// allows them: policies add up, so they could only widen what the template allows.
func TestTemplateSandboxEgressAnnotationsCountOnlyWhereTheTemplateAllows(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	allowing := testwrap.MakeTemplate(ns, "allowing").Obj()
	allowing.Annotations = map[string]string{extv1alpha1.SandboxEgressAnnotation: extv1alpha1.SandboxEgressAllowed}
	mustCreateObj(t, testwrap.MakeTemplate(ns, "strict").Obj(), allowing)
	for _, tmpl := range []string{"strict", "allowing"} {
		testwrap.Eventually(t, tmpl+": the template's policy", exists(policyOf(ns, tmpl), true))
	}
	mustCreateObj(t, testwrap.MakeClaim(ns, "strict-1").Template("strict").Obj(), testwrap.MakeClaim(ns, "allowing-1").Template("allowing").Obj())
	for _, name := range []string{"strict-1", "allowing-1"} {
		testwrap.Eventually(t, name+" ready", claimReadyIs(t, ns, name, metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
		if err := exists(egressPolicyOf(ns, name), false)(); err != nil {
			t.Errorf("%s: %v, want none: its template's policy stands in for it", name, err)
		}
		annotate(t, ns, name, map[string]*string{egressKey: str("allow-all")})
	}

	testwrap.Eventually(t, "strict: EgressPolicy=False/EgressIgnored", egressConditionIs(t, ns, "strict-1", metav1.ConditionFalse,
		agentsv1alpha1.ReasonEgressIgnored, `egress annotations are ignored on a Sandbox made from SandboxTemplate "strict"`))
	if err := exists(egressPolicyOf(ns, "strict-1"), false)(); err != nil {
		t.Errorf("an ignored annotation made a policy: %v", err)
	}
	if err := readyIs(t, ns, "strict-1", metav1.ConditionTrue, agentsv1alpha1.ReasonReady)(); err != nil {
		t.Errorf("an ignored annotation took the sandbox down: %v", err)
	}
	testwrap.Eventually(t, "allowing: the annotation is in force", sandboxPolicyIs(t, ns, "allowing-1",
		egresspolicy.Policy{Egress: &egress.Spec{Mode: egress.AllowAll}}))
	testwrap.Eventually(t, "allowing: EgressPolicy=True", egressConditionIs(t, ns, "allowing-1", metav1.ConditionTrue,
		agentsv1alpha1.ReasonEgressApplied, "allow-all:"))
}

// The template's author opened its Sandboxes (Unmanaged): they get no policy of their own.
func TestUnmanagedTemplateSandboxesHaveNoPolicyOfTheirOwn(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "open").NetworkPolicyManagement(extv1alpha1.NetworkPolicyManagementUnmanaged).Obj(),
		testwrap.MakeClaim(ns, "open-1").Template("open").Obj())
	testwrap.Eventually(t, "claim ready", claimReadyIs(t, ns, "open-1", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
	if got := getSandbox(t, ns, "open-1").Annotations[agentsv1alpha1.NetworkPolicyManagementAnnotation]; got != agentsv1alpha1.NetworkPolicyUnmanaged {
		t.Errorf("sandbox annotation %s = %q, want %s", agentsv1alpha1.NetworkPolicyManagementAnnotation, got, agentsv1alpha1.NetworkPolicyUnmanaged)
	}
	if err := exists(egressPolicyOf(ns, "open-1"), false)(); err != nil {
		t.Error(err)
	}
}

func TestDeclaredIngressSourcesAreAdmittedBesideTheRouter(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "direct").Annotation(agentsv1alpha1.IngressFromPodsAnnotation, "app=ax").Obj())
	waitForPod(t, ns, "direct")
	testwrap.Eventually(t, "policy admits app=ax", sandboxPolicyIs(t, ns, "direct", egresspolicy.Policy{
		Egress:      &egress.Spec{Mode: egress.AllowAll},
		IngressFrom: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ax"}},
	}))
	annotate(t, ns, "direct", map[string]*string{agentsv1alpha1.IngressFromPodsAnnotation: nil})
	testwrap.Eventually(t, "router alone again", sandboxPolicyIs(t, ns, "direct", egresspolicy.Policy{Egress: &egress.Spec{Mode: egress.AllowAll}}))
}

func TestUnmanagedSandboxLosesItsPolicy(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "admin-open").Obj())
	waitForPod(t, ns, "admin-open")
	testwrap.Eventually(t, "default policy", sandboxPolicyIs(t, ns, "admin-open", egresspolicy.Policy{Egress: &egress.Spec{Mode: egress.AllowAll}}))
	annotate(t, ns, "admin-open", map[string]*string{agentsv1alpha1.NetworkPolicyManagementAnnotation: str(agentsv1alpha1.NetworkPolicyUnmanaged)})
	testwrap.Eventually(t, "policy deleted", exists(egressPolicyOf(ns, "admin-open"), false))
}

// Whoever may patch pods cannot make a sandbox pod leave its policy or pose as the router: the
// controller takes its labels back and drops the router's identity.
func TestTheControllerTakesItsPodLabelsBack(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "edited").Obj())
	pod := waitForPod(t, ns, "edited")
	patch := client.MergeFrom(pod.DeepCopy())
	delete(pod.Labels, agentsv1alpha1.SandboxNameHashLabel)
	pod.Labels["app"] = "sandbox-router"
	pod.Labels[extv1alpha1.WarmPoolLabel] = "forged"
	pod.Labels["team"] = "a"
	if err := k8s.Patch(context.Background(), pod, patch); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "labels restored", func() error {
		got := podOf(ns, "edited")
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(got), got); err != nil {
			return err
		}
		l := got.Labels
		if l[agentsv1alpha1.SandboxNameHashLabel] != agentsv1alpha1.NameHash("edited") || l["app"] != "" || l[extv1alpha1.WarmPoolLabel] != "" {
			return fmt.Errorf("pod labels %v, want the tracking label back and no router or pool label", l)
		}
		if l["team"] != "a" {
			return fmt.Errorf("pod labels %v: an open label someone added was removed", l)
		}
		return nil
	})
}
