package sandbox

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete

// EgressPolicyName is the name of the Sandbox's NetworkPolicy (ingress from the router, its
// egress mode): the Sandbox's own, like its pod and Service.
func EgressPolicyName(sandboxName string) string { return sandboxName }

// egressState is what reconcileEgress made of the Sandbox's network annotations.
type egressState struct {
	requested bool // an egress annotation is set
	spec      egress.Spec
	applied   bool // the policy matches spec
	// ignored says why valid egress annotations are not in force (the pod still runs).
	ignored string
	// failOpen: the domains cannot be enforced here and the Sandbox asked to run anyway, under
	// allow-all's policy.
	failOpen bool
	// reason and message name a problem that keeps a pod from being created.
	reason, message string
}

// blocksPod reports whether no pod may be created: the policy asked for cannot be put in force.
func (s egressState) blocksPod() bool { return s.reason != "" }

// reconcileEgress keeps the Sandbox's NetworkPolicy: ingress from the router alone (and the pods
// the Sandbox declares), and for a raw Sandbox its egress mode (allow-all when it asks for
// none). It runs before the pod is created, so a pod never starts unprotected. Bad annotations
// and someone else's policy in the way leave every policy as it is (never looser) and are
// reported for the caller to keep the pod from being created.
func (r *Reconciler) reconcileEgress(ctx context.Context, sb *agentsv1beta1.Sandbox) (egressState, error) {
	st, pol, managed := r.desiredPolicy(ctx, sb)
	if st.blocksPod() {
		r.warnEgress(sb, st)
		return st, nil
	}
	current, err := r.getEgressPolicy(ctx, sb)
	if err != nil {
		return st, err
	}
	if current != nil && !metav1.IsControlledBy(current, sb) {
		if managed {
			st.reason, st.message = conflictMessage(current.Name)
			r.warnEgress(sb, st)
		}
		return st, nil
	}
	if !managed {
		if current != nil {
			log.FromContext(ctx).V(2).Info("NetworkPolicy opted out: deleting it", "networkPolicy", klog.KObj(current))
			if err := r.client.Delete(ctx, current, client.Preconditions{UID: &current.UID}); client.IgnoreNotFound(err) != nil {
				return st, fmt.Errorf("deleting NetworkPolicy %s: %w", current.Name, err)
			}
		}
		return st, nil
	}
	// Names the cluster cannot enforce: fail closed (the pod waits) or, when asked, open.
	unenforceable := r.domainsUnenforceable(ctx, sb, &st, &pol)
	desired := r.peers.PolicySpec(trackingLabels(sb), pol)
	switch {
	case current == nil && r.templatePolicyCovers(ctx, sb, pol):
		// No policy of its own: the template's says it all (templatepolicy.go).
	case current == nil:
		st, err = r.createEgressPolicy(ctx, sb, st, desired)
	case !equality.Semantic.DeepEqual(current.Spec, desired):
		updated := current.DeepCopy()
		updated.Spec = desired
		if err := r.client.Update(ctx, updated, agentsv1beta1.FieldOwner); err != nil {
			return st, fmt.Errorf("updating NetworkPolicy %s: %w", current.Name, err)
		}
		st.applied = st.requested && st.ignored == ""
	default:
		st.applied = st.requested && st.ignored == ""
	}
	if err != nil || st.blocksPod() {
		return st, err
	}
	if unenforceable != "" {
		// The NetworkPolicy (never looser than the mode) is in place; the pod waits.
		st.applied, st.reason, st.message = false, agentsv1beta1.ReasonEgressDomainsUnenforceable, unenforceable
		r.warnEgress(sb, st)
		return st, nil
	}
	return r.reconcileDomainPolicy(ctx, sb, st, pol)
}

// desiredPolicy reads the Sandbox's network annotations. managed is false when the Sandbox
// opted out of its NetworkPolicy (an admin's choice: admission guards the annotation).
func (r *Reconciler) desiredPolicy(ctx context.Context, sb *agentsv1beta1.Sandbox) (st egressState, pol egresspolicy.Policy, managed bool) {
	spec, requested, err := egress.FromAnnotations(sb.Annotations)
	st = egressState{requested: requested, spec: spec}
	if err == nil && requested {
		if err = r.peers.CheckLinkLocal(spec); err != nil {
			err = fmt.Errorf("annotation %s: %w", agentsv1beta1.EgressCIDRsAnnotation, err)
		}
	}
	if err == nil {
		pol.IngressFrom, err = egresspolicy.ParseIngressFrom(sb.Annotations)
	}
	switch v, set := sb.Annotations[agentsv1beta1.NetworkPolicyManagementAnnotation]; {
	case err != nil:
	case set && v == agentsv1beta1.NetworkPolicyUnmanaged:
		st.ignored = "the Sandbox's NetworkPolicy is Unmanaged (annotation " + agentsv1beta1.NetworkPolicyManagementAnnotation + ")"
		return st, pol, false
	case set:
		err = fmt.Errorf("annotation %s: %q is not a value it takes; the only one is %s",
			agentsv1beta1.NetworkPolicyManagementAnnotation, v, agentsv1beta1.NetworkPolicyUnmanaged)
	}
	if err != nil {
		st.reason, st.message = agentsv1beta1.ReasonInvalidEgress, err.Error()+"; no pod is created until it is fixed"
		return st, pol, true
	}
	if _, fromTemplate := sb.Labels[extv1beta1.TemplateRefHashLabel]; !fromTemplate {
		if !requested {
			spec = egress.Spec{Mode: egress.AllowAll}
		}
		pol.Egress = &spec
		return st, pol, true
	}
	// The template's own policy governs egress; an annotation could only widen it (policies
	// add up), so it counts only where the template's author allows it.
	if requested {
		if why := r.templateForbidsEgress(ctx, sb); why != "" {
			st.ignored = why
		} else {
			pol.Egress = &spec
		}
	}
	return st, pol, true
}

// templateForbidsEgress says why the egress annotations of a Sandbox made from a template do
// not count; "" when its template allows them.
func (r *Reconciler) templateForbidsEgress(ctx context.Context, sb *agentsv1beta1.Sandbox) string {
	tmpl := r.sandboxTemplate(ctx, sb)
	if tmpl == nil || tmpl.Annotations[extv1beta1.SandboxEgressAnnotation] != extv1beta1.SandboxEgressAllowed {
		return fmt.Sprintf("egress annotations are ignored on a Sandbox made from SandboxTemplate %q: its NetworkPolicy "+
			"governs egress, unless the template is annotated %s: %s", sb.Annotations[extv1beta1.TemplateRefAnnotation],
			extv1beta1.SandboxEgressAnnotation, extv1beta1.SandboxEgressAllowed)
	}
	return ""
}

func (r *Reconciler) createEgressPolicy(ctx context.Context, sb *agentsv1beta1.Sandbox, st egressState,
	desired networkingv1.NetworkPolicySpec) (egressState, error) {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: EgressPolicyName(sb.Name), Labels: trackingLabels(sb)},
		Spec:       desired,
	}
	if err := controllerutil.SetControllerReference(sb, np, r.client.Scheme()); err != nil {
		return st, err
	}
	err := r.client.Create(ctx, np, agentsv1beta1.FieldOwner)
	if apierrors.IsAlreadyExists(err) {
		// Ours, made moments ago and not in the cache yet, or someone else's: ask the API.
		return r.adoptExistingEgressPolicy(ctx, sb, st, desired)
	}
	if err != nil {
		return st, fmt.Errorf("creating NetworkPolicy %s: %w", np.Name, err)
	}
	r.createdPolicies.Expect(client.ObjectKeyFromObject(sb), sb.UID, np.DeepCopy())
	log.FromContext(ctx).V(2).Info("created the egress NetworkPolicy", "networkPolicy", klog.KObj(np))
	st.applied = st.requested && st.ignored == ""
	return st, nil
}

func (r *Reconciler) adoptExistingEgressPolicy(ctx context.Context, sb *agentsv1beta1.Sandbox, st egressState,
	desired networkingv1.NetworkPolicySpec) (egressState, error) {
	live := &networkingv1.NetworkPolicy{}
	if err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: EgressPolicyName(sb.Name)}, live); err != nil {
		// Gone in between (NotFound) or unreadable: try again, no pod meanwhile.
		return st, fmt.Errorf("reading NetworkPolicy %s: %w", EgressPolicyName(sb.Name), err)
	}
	if !metav1.IsControlledBy(live, sb) {
		st.reason, st.message = conflictMessage(live.Name)
		r.warnEgress(sb, st)
		return st, nil
	}
	if !equality.Semantic.DeepEqual(live.Spec, desired) {
		live.Spec = desired
		if err := r.client.Update(ctx, live, agentsv1beta1.FieldOwner); err != nil {
			return st, fmt.Errorf("updating NetworkPolicy %s: %w", live.Name, err)
		}
	}
	st.applied = st.requested && st.ignored == ""
	return st, nil
}

func conflictMessage(policy string) (string, string) {
	return kindConflictMessage("NetworkPolicy", policy)
}

func kindConflictMessage(kind, policy string) (string, string) {
	return agentsv1beta1.ReasonEgressPolicyConflict, fmt.Sprintf(
		"%s %s exists and is not controlled by this Sandbox; delete or rename it (no pod is created until then)", kind, policy)
}

// getEgressPolicy reads the policy named after the Sandbox from the cache (nil when none).
func (r *Reconciler) getEgressPolicy(ctx context.Context, sb *agentsv1beta1.Sandbox) (*networkingv1.NetworkPolicy, error) {
	np := &networkingv1.NetworkPolicy{}
	key := client.ObjectKeyFromObject(sb)
	err := r.client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: EgressPolicyName(sb.Name)}, np)
	if apierrors.IsNotFound(err) {
		if mine, ok := r.createdPolicies.Get(key, sb.UID); ok {
			return mine.DeepCopy(), nil // created moments ago, not in the cache yet
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.createdPolicies.Observed(key, sb.UID)
	return np, nil
}

// warnEgress emits a Warning event when the problem is new, not on every reconcile.
func (r *Reconciler) warnEgress(sb *agentsv1beta1.Sandbox, st egressState) {
	prev := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionEgressPolicy)
	if prev != nil && prev.Reason == st.reason && prev.Message == st.message {
		return
	}
	r.event(sb, corev1.EventTypeWarning, st.reason, st.message)
}

// setEgressCondition reports the egress mode in force, or why it is not; absent when the
// Sandbox asks for none. After a failed write the condition keeps what was last in force.
func setEgressCondition(sb *agentsv1beta1.Sandbox, st egressState) {
	cond := metav1.Condition{Type: agentsv1beta1.SandboxConditionEgressPolicy, ObservedGeneration: sb.Generation}
	switch {
	case st.blocksPod():
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, st.reason, st.message
	case !st.requested:
		meta.RemoveStatusCondition(&sb.Status.Conditions, agentsv1beta1.SandboxConditionEgressPolicy)
		return
	case st.ignored != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, agentsv1beta1.ReasonEgressIgnored, st.ignored
	case st.applied && st.failOpen:
		cond.Status, cond.Reason = metav1.ConditionTrue, agentsv1beta1.ReasonEgressDomainsFailOpen
		cond.Message = st.spec.FailOpenMessage(EgressPolicyName(sb.Name))
	case st.applied:
		cond.Status, cond.Reason = metav1.ConditionTrue, agentsv1beta1.ReasonEgressApplied
		cond.Message = st.spec.AppliedMessage(EgressPolicyName(sb.Name))
	default:
		return
	}
	meta.SetStatusCondition(&sb.Status.Conditions, cond)
}
