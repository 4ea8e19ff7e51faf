package sandboxtemplate

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/fqdnpolicy"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// A template's domain allow-list (annotation agents.x-k8s.io/egress-domains, docs/egress.md
// "Domains") limits the egress of every Sandbox made from it: its NetworkPolicy allows DNS to the
// cluster DNS instead of the default public internet (beside the template's own egress rules,
// when it has them), and a CiliumNetworkPolicy of the same name opens the names. A claim cannot
// widen the list: claims carry no egress, and tenants may not write templates.

// templateDomains is what a template's annotations ask for.
type templateDomains struct {
	names    []string
	failOpen bool
	// invalid: a list admission would refuse (written before its policy); no name is opened.
	invalid bool
}

// listed reports whether the template limits egress to names.
func (d templateDomains) listed() bool { return len(d.names) > 0 || d.invalid }

// readDomains reads the template's list, and tells its author about a bad list, or one this
// cluster cannot enforce.
func (r *Reconciler) readDomains(tmpl *extv1beta1.SandboxTemplate) templateDomains {
	names, failOpen, err := egress.TemplateDomains(tmpl.Annotations)
	switch {
	case err != nil:
		r.recorder.Eventf(tmpl, corev1.EventTypeWarning, agentsv1beta1.ReasonInvalidEgress,
			"%v; the template's Sandboxes reach no name until it is fixed", err)
		return templateDomains{invalid: true}
	case len(names) == 0 || r.enforceDomains:
	case failOpen:
		r.recorder.Eventf(tmpl, corev1.EventTypeWarning, agentsv1beta1.ReasonEgressDomainsFailOpen,
			"this cluster cannot enforce the egress domains (no CiliumNetworkPolicy engine); as %s asks, "+
				"Sandboxes made from this template run with egress open to everything allow-all allows",
			agentsv1beta1.EgressDomainsFailOpenAnnotation)
	default:
		r.recorder.Eventf(tmpl, corev1.EventTypeWarning, agentsv1beta1.ReasonEgressDomainsUnenforceable,
			"this cluster cannot enforce the egress domains (no CiliumNetworkPolicy engine); Sandboxes made from "+
				"this template get no pod unless it is annotated %s: \"true\"", agentsv1beta1.EgressDomainsFailOpenAnnotation)
	}
	return templateDomains{names: names, failOpen: failOpen}
}

// domainEgress are the NetworkPolicy egress rules a domain list adds: DNS to the cluster DNS, and
// where names cannot be enforced and the template fails open, allow-all's.
func (r *Reconciler) domainEgress(d templateDomains) []networkingv1.NetworkPolicyEgressRule {
	if !d.listed() {
		return nil
	}
	rules := r.network.EgressRules(egress.Spec{Mode: egress.Restricted})
	if d.failOpen && !r.enforceDomains {
		rules = append(rules, r.network.EgressRules(egress.Spec{Mode: egress.AllowAll})...)
	}
	return rules
}

// reconcileDomainPolicy keeps the template's CiliumNetworkPolicy: present with its names while
// it lists some (and its network is managed), absent otherwise.
func (r *Reconciler) reconcileDomainPolicy(ctx context.Context, tmpl *extv1beta1.SandboxTemplate, d templateDomains) error {
	if !r.enforceDomains {
		return nil
	}
	current := fqdnpolicy.Empty()
	key := types.NamespacedName{Namespace: tmpl.Namespace, Name: PolicyName(tmpl.Name)}
	err := r.client.Get(ctx, key, current)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	found := err == nil
	if found && !metav1.IsControlledBy(current, tmpl) {
		r.recorder.Eventf(tmpl, corev1.EventTypeWarning, extv1beta1.EventPolicyConflict,
			"%s %s exists and is not owned by this template; leaving it alone", fqdnpolicy.GVK.Kind, key.Name)
		return nil
	}
	want := len(d.names) > 0 && tmpl.Spec.NetworkPolicyManagement != extv1beta1.NetworkPolicyManagementUnmanaged
	switch {
	case !want && found:
		log.FromContext(ctx).V(2).Info("no domains any more: deleting the template's CiliumNetworkPolicy", "policy", klog.KObj(current))
		uid := current.GetUID()
		return client.IgnoreNotFound(r.client.Delete(ctx, current, client.Preconditions{UID: &uid}))
	case !want:
		return nil
	}
	pods := selectTemplatePods(tmpl)
	desired := fqdnpolicy.Spec(pods.MatchLabels, d.names, fqdnpolicy.DNS{
		Namespace: r.network.DNSNamespace, PodLabels: r.network.DNSPodLabels, ServiceIPs: r.network.DNSServiceIPs,
	})
	if found {
		if fqdnpolicy.SameSpec(current, desired) {
			return nil
		}
		fqdnpolicy.SetSpec(current, desired)
		return r.client.Update(ctx, current)
	}
	cnp := fqdnpolicy.New(key.Namespace, key.Name, nil, desired)
	if err := controllerutil.SetControllerReference(tmpl, cnp, r.client.Scheme()); err != nil {
		return err
	}
	if err := r.client.Create(ctx, cnp); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s: %w", fqdnpolicy.GVK.Kind, err)
	}
	log.FromContext(ctx).V(2).Info("created the template's CiliumNetworkPolicy", "policy", klog.KObj(cnp))
	return nil
}
