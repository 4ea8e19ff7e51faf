package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxtemplate"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func policyOf(ns, template string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sandboxtemplate.PolicyName(template)}}
}

func TestTemplateSecureDefaultNetworkPolicy(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "secure").Obj())
	np := policyOf(ns, "secure")
	testwrap.Eventually(t, "default NetworkPolicy exists", exists(np, true))

	if len(np.Spec.PolicyTypes) != 2 {
		t.Errorf("policyTypes = %v, want Ingress and Egress (default deny both ways)", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 {
		t.Fatalf("ingress = %+v, want one rule admitting the router", np.Spec.Ingress)
	}
	from := np.Spec.Ingress[0].From[0]
	if from.PodSelector == nil || from.PodSelector.MatchLabels["app"] != "sandbox-router" ||
		from.NamespaceSelector == nil || from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "agent-sandbox-system" {
		t.Errorf("ingress peer = %+v, want the sandbox-router pods of agent-sandbox-system", from)
	}
	blocked := map[string]bool{}
	for _, rule := range np.Spec.Egress {
		for _, to := range rule.To {
			if to.IPBlock != nil {
				for _, e := range to.IPBlock.Except {
					blocked[e] = true
				}
			}
		}
	}
	for _, cidr := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "fc00::/7", "fe80::/10"} {
		if !blocked[cidr] {
			t.Errorf("egress does not block %s; blocked: %v", cidr, blocked)
		}
	}
	if np.Spec.PodSelector.MatchLabels[extv1alpha1.TemplateRefHashLabel] == "" {
		t.Errorf("podSelector = %v, want the template's pods", np.Spec.PodSelector)
	}
}

func TestTemplateCustomRulesAndManagementModes(t *testing.T) {
	ns := newNamespace(t)
	tmpl := testwrap.MakeTemplate(ns, "custom").NetworkPolicy(&extv1alpha1.NetworkPolicySpec{
		Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24"}}}}},
	}).Obj()
	mustCreateObj(t, tmpl)
	np := policyOf(ns, "custom")
	testwrap.Eventually(t, "custom policy applied verbatim (no ingress rule = deny all ingress)", func() error {
		if err := exists(np, true)(); err != nil {
			return err
		}
		if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 1 || np.Spec.Egress[0].To[0].IPBlock.CIDR != "203.0.113.0/24" {
			return fmt.Errorf("spec = %+v", np.Spec)
		}
		return nil
	})

	// An edit of the rules updates the one shared policy.
	latest := tmpl.DeepCopy()
	edit(t, latest, func(tp *extv1alpha1.SandboxTemplate) {
		tp.Spec.NetworkPolicy.Egress[0].To[0].IPBlock.CIDR = "198.51.100.0/24"
	})
	testwrap.Eventually(t, "policy follows the rule edit", func() error {
		if err := exists(np, true)(); err != nil {
			return err
		}
		if got := np.Spec.Egress[0].To[0].IPBlock.CIDR; got != "198.51.100.0/24" {
			return errors.New("egress CIDR " + got)
		}
		return nil
	})

	edit(t, latest, func(tp *extv1alpha1.SandboxTemplate) {
		tp.Spec.NetworkPolicyManagement = extv1alpha1.NetworkPolicyManagementUnmanaged
	})
	testwrap.Eventually(t, "Unmanaged removes our policy", exists(np, false))
}

func TestTemplateNeverOverwritesAPolicyItDoesNotOwn(t *testing.T) {
	ns := newNamespace(t)
	foreign := policyOf(ns, "taken")
	foreign.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"mine": "yes"}}
	mustCreateObj(t, foreign)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "taken").Obj())
	testwrap.Eventually(t, "conflict reported as an event", func() error {
		events := &corev1.EventList{}
		if err := k8s.List(context.Background(), events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == extv1alpha1.EventPolicyConflict {
				return nil
			}
		}
		return errors.New("no NetworkPolicyConflict event")
	})
	after := policyOf(ns, "taken")
	if err := exists(after, true)(); err != nil || after.Spec.PodSelector.MatchLabels["mine"] != "yes" || len(after.OwnerReferences) != 0 {
		t.Errorf("foreign policy changed: %+v", after)
	}
}
