package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The contract, OnReplenish: "stale pods are only replaced when they are manually deleted or when
// these stale pods are adopted by sandboxclaims and hence replaced by fresh pods". A claim takes
// the stale member as it is, and the pool refills from the edited template.
func TestOnReplenishPoolReplacesAnAdoptedStaleMemberWithAFreshOne(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	tmpl := testwrap.MakeTemplate(ns, "tpl").Obj()
	mustCreateObj(t, tmpl, testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(1).
		UpdateStrategy(extv1alpha1.OnReplenishSandboxWarmPoolUpdateStrategyType).Obj())
	testwrap.Eventually(t, "1 ready", poolReady(t, ns, "pool", 1))
	stale := onlyMember(t, ns)

	editTemplateImage(t, tmpl, "sandbox-runtime:v2")
	mustCreateObj(t, testwrap.MakeClaim(ns, "c").Template("tpl").Obj())
	testwrap.Eventually(t, "the claim adopts the stale member", func() error {
		if got := getClaim(t, ns, "c").Status.SandboxStatus.Name; got != stale {
			return fmt.Errorf("claim's sandbox %q, want the stale member %s", got, stale)
		}
		return nil
	})
	testwrap.Eventually(t, "a fresh member from the edited template replaces it", func() error {
		live := liveMembers(t, ns)
		if len(live) != 1 || live[stale] {
			return fmt.Errorf("members %v, want one new member", live)
		}
		for name := range live {
			if img := getSandbox(t, ns, name).Spec.PodTemplate.Spec.Containers[0].Image; img != "sandbox-runtime:v2" {
				return fmt.Errorf("new member %s runs %s, want the edited template's sandbox-runtime:v2", name, img)
			}
		}
		return poolReady(t, ns, "pool", 1)()
	})
	if img := getSandbox(t, ns, stale).Spec.PodTemplate.Spec.Containers[0].Image; img == "sandbox-runtime:v2" {
		t.Errorf("the adopted member was rebuilt (image %s); adoption keeps the running sandbox as it is", img)
	}
}

// The contract, Recreate: "stale pods are deleted immediately to ensure the pool only contains fresh
// pods", so a claim must never get one in the moment before it goes. The deletion is held back
// by an admission policy here, so that the stale member stays a candidate for as long as the
// test needs: a claim passes it over for the fresh member (or a cold start), not by luck of
// timing.
func TestRecreatePoolNeverHandsAStaleMemberToAClaim(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	tmpl := testwrap.MakeTemplate(ns, "tpl").Obj()
	pool := testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(1).
		UpdateStrategy(extv1alpha1.RecreateSandboxWarmPoolUpdateStrategyType).Obj()
	mustCreateObj(t, tmpl, pool)
	testwrap.Eventually(t, "1 ready", poolReady(t, ns, "pool", 1))
	stale := onlyMember(t, ns)
	refuseSandboxDeletes(t, ns, stale)

	editTemplateImage(t, tmpl, "sandbox-runtime:v2")
	// A fresh member built from the edit shows that the controller's cache has the edit (the
	// claim controller reads templates from the same cache) while the stale one is still there.
	patchPoolReplicas(t, pool, 2)
	got := claimBeside(t, ns, "pool", stale)
	if got == stale {
		t.Fatalf("the claim got the stale member %s of a Recreate pool", got)
	}
	if img := getSandbox(t, ns, got).Spec.PodTemplate.Spec.Containers[0].Image; img != "sandbox-runtime:v2" {
		t.Errorf("the claim's sandbox %s runs %s, want the edited template's sandbox-runtime:v2", got, img)
	}
	if sb := getSandbox(t, ns, stale); metav1.GetControllerOf(sb) == nil || metav1.GetControllerOf(sb).Kind != "SandboxWarmPool" {
		t.Errorf("stale member %s owners %v, want still the pool's", stale, sb.OwnerReferences)
	}
}

// refuseSandboxDeletes installs, for the test's duration, a ValidatingAdmissionPolicy refusing
// every delete of a Sandbox in ns, and waits until it refuses one of probe.
func refuseSandboxDeletes(t *testing.T, ns, probe string) {
	t.Helper()
	name := "test-no-sandbox-deletes-" + ns
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{agentsv1alpha1.GroupVersion.Group},
						APIVersions: []string{"*"}, Resources: []string{"sandboxes"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "test: Sandbox deletes held back"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	testwrap.Eventually(t, "Sandbox deletes refused", func() error {
		sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: probe}}
		err := k8s.Delete(context.Background(), sb, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "Sandbox deletes held back") {
			return nil
		}
		return fmt.Errorf("dry-run delete: %v, want the test policy's refusal", err)
	})
}

// claimBeside waits until the pool has one fresh ready member beside the kept one (whose
// deletion is held back), then claims from template tpl and returns the Sandbox it got.
func claimBeside(t *testing.T, ns, pool, kept string) string {
	t.Helper()
	testwrap.Eventually(t, "a fresh member ready beside "+kept, func() error {
		if live := liveMembers(t, ns); len(live) != 2 || !live[kept] {
			return fmt.Errorf("members %v, want %s and one fresh", live, kept)
		}
		return poolReady(t, ns, pool, 2)()
	})
	mustCreateObj(t, testwrap.MakeClaim(ns, "c").Template("tpl").Obj())
	testwrap.Eventually(t, "claim Ready", claimReadyIs(t, ns, "c", metav1.ConditionTrue, ""))
	return getClaim(t, ns, "c").Status.SandboxStatus.Name
}
