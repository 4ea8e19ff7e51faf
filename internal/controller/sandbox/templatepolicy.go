package sandbox

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxtemplate"
)

// A Sandbox made from a template is covered by its template's NetworkPolicy, which selects the
// pods of every Sandbox made from it, admits the router and governs egress. The Sandbox's own
// policy would only repeat its ingress rule: one object and one write more per pool member,
// for nothing policies' union would change. So a Sandbox whose own policy would say nothing
// more gets none while the template's is in force; where it is not (yet), it gets its own as
// before, before its pod, and keeps it.

// templatePolicyCovers reports whether the template's NetworkPolicy already says all that pol
// would: pol adds no egress and no ingress source, and the template's policy (from the cache)
// is the template controller's, selects this Sandbox's pods and lets the router in.
func (r *Reconciler) templatePolicyCovers(ctx context.Context, sb *agentsv1beta1.Sandbox, pol egresspolicy.Policy) bool {
	if pol.Egress != nil || pol.IngressFrom != nil {
		return false
	}
	// The pod carries the label the template's policy selects (admission keeps both the
	// controller's).
	hash, fromTemplate := sb.Labels[extv1beta1.TemplateRefHashLabel]
	if !fromTemplate || sb.Spec.PodTemplate.ObjectMeta.Labels[extv1beta1.TemplateRefHashLabel] != hash {
		return false
	}
	tmpl := r.sandboxTemplate(ctx, sb)
	if tmpl == nil || tmpl.Spec.NetworkPolicyManagement == extv1beta1.NetworkPolicyManagementUnmanaged {
		return false
	}
	np := &networkingv1.NetworkPolicy{}
	key := types.NamespacedName{Namespace: sb.Namespace, Name: sandboxtemplate.PolicyName(tmpl.Name)}
	if err := r.client.Get(ctx, key, np); err != nil || !metav1.IsControlledBy(np, tmpl) || np.DeletionTimestamp != nil {
		return false
	}
	selects := len(np.Spec.PodSelector.MatchExpressions) == 0 && len(np.Spec.PodSelector.MatchLabels) == 1 &&
		np.Spec.PodSelector.MatchLabels[extv1beta1.TemplateRefHashLabel] == hash
	return selects && hasBothPolicyTypes(np.Spec) && r.peers.AdmitsRouter(np.Spec)
}

// hasBothPolicyTypes: the policy isolates its pods both ways (the template controller always
// writes both; without Ingress its rules would not isolate ingress at all).
func hasBothPolicyTypes(spec networkingv1.NetworkPolicySpec) bool {
	var ingress, egress bool
	for _, t := range spec.PolicyTypes {
		ingress = ingress || t == networkingv1.PolicyTypeIngress
		egress = egress || t == networkingv1.PolicyTypeEgress
	}
	return ingress && egress
}
