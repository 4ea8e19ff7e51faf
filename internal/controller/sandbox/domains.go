package sandbox

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/fqdnpolicy"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// A domain allow-list (docs/egress.md, "Domains") is enforced by a CiliumNetworkPolicy named
// after the Sandbox, beside its NetworkPolicy, when the controller found Cilium at start. Without
// it the list cannot be enforced: the Sandbox gets no pod (EgressDomainsUnenforceable) unless it
// asked to fail open, and then runs under allow-all's NetworkPolicy.

// domainsUnenforceable decides what a list the cluster cannot enforce does to this reconcile:
// "" when there is none (or it fails open: pol then asks for allow-all and st says so), else why
// the pod must wait. A Sandbox made from a template answers for its template's list too.
func (r *Reconciler) domainsUnenforceable(ctx context.Context, sb *agentsv1beta1.Sandbox, st *egressState, pol *egresspolicy.Policy) string {
	if r.enforceDomains {
		return ""
	}
	if pol.Egress != nil && len(pol.Egress.Domains) > 0 {
		if pol.Egress.DomainsFailOpen {
			st.failOpen = true
			pol.Egress = &egress.Spec{Mode: egress.AllowAll}
			return ""
		}
		return fmt.Sprintf("annotation %s lists names, and this cluster cannot enforce them (%s); no pod is created unless %s is \"true\"",
			agentsv1beta1.EgressDomainsAnnotation, noEngine, agentsv1beta1.EgressDomainsFailOpenAnnotation)
	}
	if _, fromTemplate := sb.Labels[extv1beta1.TemplateRefHashLabel]; !fromTemplate {
		return ""
	}
	tmpl := r.sandboxTemplate(ctx, sb)
	if tmpl == nil || tmpl.Spec.NetworkPolicyManagement == extv1beta1.NetworkPolicyManagementUnmanaged {
		return ""
	}
	domains, failOpen, err := egress.TemplateDomains(tmpl.Annotations)
	if err != nil || len(domains) == 0 || failOpen {
		// A bad list is the template's to report; its NetworkPolicy then opens no names.
		return ""
	}
	return fmt.Sprintf("SandboxTemplate %q lists egress domains (annotation %s), and this cluster cannot enforce them (%s); "+
		"no pod is created unless the template is annotated %s: \"true\"", tmpl.Name, agentsv1beta1.EgressDomainsAnnotation,
		noEngine, agentsv1beta1.EgressDomainsFailOpenAnnotation)
}

// noEngine says why names cannot be enforced.
const noEngine = "the controller found no cilium.io/v2 CiliumNetworkPolicy API when it started, or was started with --egress-domains-engine=none"

// sandboxTemplate is the template the Sandbox was made from (from the cache), or nil. It is
// the one whose name hash the Sandbox's label carries (admission keeps that label the
// controller's).
func (r *Reconciler) sandboxTemplate(ctx context.Context, sb *agentsv1beta1.Sandbox) *extv1beta1.SandboxTemplate {
	name := sb.Annotations[extv1beta1.TemplateRefAnnotation]
	if name == "" || agentsv1beta1.NameHash(name) != sb.Labels[extv1beta1.TemplateRefHashLabel] {
		return nil
	}
	tmpl := &extv1beta1.SandboxTemplate{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, tmpl); err != nil {
		return nil
	}
	return tmpl
}

// reconcileDomainPolicy keeps the Sandbox's CiliumNetworkPolicy: present with its names while
// pol lists some, absent otherwise. Someone else's policy of the name blocks the pod while the
// Sandbox needs its own.
func (r *Reconciler) reconcileDomainPolicy(ctx context.Context, sb *agentsv1beta1.Sandbox, st egressState,
	pol egresspolicy.Policy) (egressState, error) {
	if !r.enforceDomains {
		return st, nil
	}
	want := pol.Egress != nil && len(pol.Egress.Domains) > 0
	current, err := r.getDomainPolicy(ctx, r.client, sb)
	if err != nil {
		return st, err
	}
	if current != nil && !metav1.IsControlledBy(current, sb) {
		if want {
			st.applied = false
			st.reason, st.message = kindConflictMessage(fqdnpolicy.GVK.Kind, current.GetName())
			r.warnEgress(sb, st)
		}
		return st, nil
	}
	if !want {
		if current != nil {
			log.FromContext(ctx).V(2).Info("no domains any more: deleting the CiliumNetworkPolicy", "policy", klog.KObj(current))
			uid := current.GetUID()
			if err := r.client.Delete(ctx, current, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				return st, fmt.Errorf("deleting %s %s: %w", fqdnpolicy.GVK.Kind, current.GetName(), err)
			}
		}
		return st, nil
	}
	desired := fqdnpolicy.Spec(trackingLabels(sb), pol.Egress.Domains, r.dns())
	if current == nil {
		return r.createDomainPolicy(ctx, sb, st, desired)
	}
	return st, r.updateDomainPolicy(ctx, current, desired)
}

func (r *Reconciler) createDomainPolicy(ctx context.Context, sb *agentsv1beta1.Sandbox, st egressState, desired map[string]any) (egressState, error) {
	cnp := fqdnpolicy.New(sb.Namespace, EgressPolicyName(sb.Name), trackingLabels(sb), desired)
	if err := controllerutil.SetControllerReference(sb, cnp, r.client.Scheme()); err != nil {
		return st, err
	}
	err := r.client.Create(ctx, cnp, agentsv1beta1.FieldOwner)
	if apierrors.IsAlreadyExists(err) {
		// Ours, made moments ago and not in the cache yet, or someone else's: ask the API.
		live, err := r.getDomainPolicy(ctx, r.apiReader, sb)
		if err != nil {
			return st, err
		}
		if live == nil {
			// Gone in between: try again, no pod meanwhile.
			return st, fmt.Errorf("%s %s existed, then did not", fqdnpolicy.GVK.Kind, cnp.GetName())
		}
		if !metav1.IsControlledBy(live, sb) {
			st.applied = false
			st.reason, st.message = kindConflictMessage(fqdnpolicy.GVK.Kind, live.GetName())
			r.warnEgress(sb, st)
			return st, nil
		}
		return st, r.updateDomainPolicy(ctx, live, desired)
	}
	if err != nil {
		return st, fmt.Errorf("creating %s %s: %w", fqdnpolicy.GVK.Kind, cnp.GetName(), err)
	}
	log.FromContext(ctx).V(2).Info("created the CiliumNetworkPolicy of the egress domains", "policy", klog.KObj(cnp))
	return st, nil
}

func (r *Reconciler) updateDomainPolicy(ctx context.Context, current *unstructured.Unstructured, desired map[string]any) error {
	if fqdnpolicy.SameSpec(current, desired) {
		return nil
	}
	updated := current.DeepCopy()
	fqdnpolicy.SetSpec(updated, desired)
	if err := r.client.Update(ctx, updated, agentsv1beta1.FieldOwner); err != nil {
		return fmt.Errorf("updating %s %s: %w", fqdnpolicy.GVK.Kind, current.GetName(), err)
	}
	return nil
}

// getDomainPolicy reads the CiliumNetworkPolicy named after the Sandbox (nil when none).
func (r *Reconciler) getDomainPolicy(ctx context.Context, reader client.Reader, sb *agentsv1beta1.Sandbox) (*unstructured.Unstructured, error) {
	cnp := fqdnpolicy.Empty()
	err := reader.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: EgressPolicyName(sb.Name)}, cnp)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", fqdnpolicy.GVK.Kind, EgressPolicyName(sb.Name), err)
	}
	return cnp, nil
}

// dns is the cluster DNS the CiliumNetworkPolicy's lookups go to: the NetworkPolicy's.
func (r *Reconciler) dns() fqdnpolicy.DNS {
	return fqdnpolicy.DNS{Namespace: r.peers.DNSNamespace, PodLabels: r.peers.DNSPodLabels, ServiceIPs: r.peers.DNSServiceIPs}
}
