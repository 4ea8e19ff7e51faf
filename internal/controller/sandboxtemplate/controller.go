// Package sandboxtemplate keeps one NetworkPolicy per SandboxTemplate, shared by every sandbox
// made from it, and for a template with a domain allow-list the CiliumNetworkPolicy that opens
// those names (domains.go).
package sandboxtemplate

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/fqdnpolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/podmeta"
)

// RouterPeer identifies the sandbox router's pods, the only ingress the secure default allows.
type RouterPeer struct {
	Namespace string            // matched through the kubernetes.io/metadata.name label
	PodLabels map[string]string // the router pods' labels
}

// DefaultRouterPeer is where `config/` deploys the router (the Sandbox policies' default too).
var DefaultRouterPeer = RouterPeer{Namespace: egresspolicy.DefaultPeers().RouterNamespace, PodLabels: egresspolicy.DefaultPeers().RouterPodLabels}

// Reconciler keeps the template's NetworkPolicy.
type Reconciler struct {
	client   client.Client
	recorder record.EventRecorder
	router   RouterPeer
	// network names the cluster DNS, which a template with a domain list lets its pods query.
	network egresspolicy.Peers
	// enforceDomains: domain lists become CiliumNetworkPolicies.
	enforceDomains bool
}

// Options configure a Reconciler; a zero field takes its default.
type Options struct {
	// Recorder receives events (default: dropped).
	Recorder record.EventRecorder
	// Router is who may reach sandboxes under a template's default NetworkPolicy (default
	// DefaultRouterPeer).
	Router RouterPeer
	// Network names the cluster DNS (default egresspolicy.DefaultPeers()'s).
	Network *egresspolicy.Peers
	// EnforceDomains writes a CiliumNetworkPolicy for a template's domain list; off, the list
	// cannot be enforced and its Sandboxes get no pod unless the template fails open.
	EnforceDomains bool
}

// New returns a template reconciler writing through c.
func New(c client.Client, opts Options) *Reconciler {
	r := &Reconciler{client: c, recorder: opts.Recorder, router: opts.Router, network: egresspolicy.DefaultPeers(), enforceDomains: opts.EnforceDomains}
	if opts.Network != nil {
		r.network = *opts.Network
	}
	if r.recorder == nil {
		r.recorder = &record.FakeRecorder{} // drops events (its channel is nil)
	}
	r.router = r.router.OrDefault()
	return r
}

// OrDefault is p, or DefaultRouterPeer when p names no namespace.
func (p RouterPeer) OrDefault() RouterPeer {
	if p.Namespace == "" {
		return DefaultRouterPeer
	}
	return p
}

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete

// PolicyName is the name of a template's NetworkPolicy.
func PolicyName(template string) string { return template + "-network-policy" }

// Reconcile creates, updates or deletes the template's NetworkPolicy and CiliumNetworkPolicy.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tmpl := &extv1beta1.SandboxTemplate{}
	if err := r.client.Get(ctx, req.NamespacedName, tmpl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tmpl.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	r.warnReservedPodMetadata(tmpl)
	domains := r.readDomains(tmpl)
	if err := r.reconcileNetworkPolicy(ctx, tmpl, domains); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.reconcileDomainPolicy(ctx, tmpl, domains)
}

// reconcileNetworkPolicy creates, updates or deletes the template's NetworkPolicy.
func (r *Reconciler) reconcileNetworkPolicy(ctx context.Context, tmpl *extv1beta1.SandboxTemplate, domains templateDomains) error {
	current := &networkingv1.NetworkPolicy{}
	key := types.NamespacedName{Namespace: tmpl.Namespace, Name: PolicyName(tmpl.Name)}
	err := r.client.Get(ctx, key, current)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	found := err == nil
	if found && !metav1.IsControlledBy(current, tmpl) {
		// Never overwrite what someone else made; say so where the user looks.
		log.FromContext(ctx).V(2).Info("a NetworkPolicy of the template's name belongs to someone else; leaving it alone", "networkPolicy", klog.KObj(current))
		r.recorder.Eventf(tmpl, corev1.EventTypeWarning, extv1beta1.EventPolicyConflict,
			"NetworkPolicy %s exists and is not owned by this template; leaving it alone", key.Name)
		return nil
	}

	if tmpl.Spec.NetworkPolicyManagement == extv1beta1.NetworkPolicyManagementUnmanaged {
		if found {
			log.FromContext(ctx).V(2).Info("NetworkPolicy management is Unmanaged: deleting the template's policy", "networkPolicy", klog.KObj(current))
			return client.IgnoreNotFound(r.client.Delete(ctx, current, client.Preconditions{UID: &current.UID}))
		}
		return nil
	}

	desired := r.desiredSpec(tmpl, domains)
	if !found {
		np := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
			Spec:       desired,
		}
		if err := controllerutil.SetControllerReference(tmpl, np, r.client.Scheme()); err != nil {
			return err
		}
		if err := r.client.Create(ctx, np); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating NetworkPolicy: %w", err)
		}
		log.FromContext(ctx).V(2).Info("created the template's NetworkPolicy", "networkPolicy", klog.KObj(np))
		return nil
	}
	if equality.Semantic.DeepEqual(current.Spec, desired) {
		return nil
	}
	updated := current.DeepCopy()
	updated.Spec = desired
	log.FromContext(ctx).V(2).Info("updating the template's NetworkPolicy to its rules", "networkPolicy", klog.KObj(updated))
	return r.client.Update(ctx, updated)
}

// desiredSpec is the user's rules verbatim, or the secure default when none are given; the
// pod selector and policy types are always ours, so both directions default to deny. A domain
// list replaces the default egress: the names are the CiliumNetworkPolicy's to open
// (domainEgress).
func (r *Reconciler) desiredSpec(tmpl *extv1beta1.SandboxTemplate, domains templateDomains) networkingv1.NetworkPolicySpec {
	spec := networkingv1.NetworkPolicySpec{
		PodSelector: selectTemplatePods(tmpl),
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
	}
	if np := tmpl.Spec.NetworkPolicy; np != nil {
		spec.Ingress = deepCopyIngress(np.Ingress)
		spec.Egress = append(deepCopyEgress(np.Egress), r.domainEgress(domains)...)
		return spec
	}
	spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: r.router.Namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: r.router.PodLabels},
	}}}}
	if domains.listed() {
		spec.Egress = r.domainEgress(domains)
		return spec
	}
	spec.Egress = defaultEgress()
	return spec
}

// selectTemplatePods selects the pods of every Sandbox made from tmpl.
func selectTemplatePods(tmpl *extv1beta1.SandboxTemplate) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{extv1beta1.TemplateRefHashLabel: agentsv1beta1.NameHash(tmpl.Name)}}
}

// defaultEgress is the public internet: no private, link-local or carrier-grade NAT ranges.
func defaultEgress() []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{
			"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", // RFC 1918
			"169.254.0.0/16", // link-local, cloud metadata servers
			"100.64.0.0/10",  // carrier-grade NAT, used by some pod networks
		}}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: []string{"fc00::/7", "fe80::/10"}}},
	}}}
}

// warnReservedPodMetadata tells the template's author which pod labels and annotations are left
// out of its Sandboxes (blueprint.NewSandbox filters them with the same rules).
func (r *Reconciler) warnReservedPodMetadata(tmpl *extv1beta1.SandboxTemplate) {
	md := tmpl.Spec.PodTemplate.ObjectMeta
	problems := r.PodRules().Problems(md.Labels, md.Annotations)
	if len(problems) > 0 {
		r.recorder.Eventf(tmpl, corev1.EventTypeWarning, extv1beta1.EventReservedPodMetadata,
			"left out of every Sandbox made from this template: %s", strings.Join(problems, "; "))
	}
}

// Router is who the template policies admit: the router's pods, defaults applied.
func (r *Reconciler) Router() RouterPeer { return r.router }

// PodRules are the pod metadata rules that follow from where the router runs.
func (r *Reconciler) PodRules() podmeta.Rules {
	return podmeta.Rules{RouterLabels: r.router.PodLabels}
}

func deepCopyIngress(in []networkingv1.NetworkPolicyIngressRule) []networkingv1.NetworkPolicyIngressRule {
	if in == nil {
		return nil
	}
	out := make([]networkingv1.NetworkPolicyIngressRule, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

func deepCopyEgress(in []networkingv1.NetworkPolicyEgressRule) []networkingv1.NetworkPolicyEgressRule {
	if in == nil {
		return nil
	}
	out := make([]networkingv1.NetworkPolicyEgressRule, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// SetupWithManager registers the reconciler; edits or deletion of the policy bring it back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&extv1beta1.SandboxTemplate{}).
		Owns(&networkingv1.NetworkPolicy{})
	if r.enforceDomains {
		b = b.Owns(fqdnpolicy.Empty())
	}
	return b.Named("sandboxtemplate").Complete(r)
}
