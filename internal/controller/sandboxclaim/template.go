package sandboxclaim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
)

// templateOf returns the template a claim is served from: its sandboxTemplateRef, or, when that
// is empty, the template of the warm pool the claim names. A claim created in v1beta1 names only
// a pool (spec.warmPoolRef); a v1alpha1 claim's template and warmpool ride on the stored object
// (see docs/api-versions.md).
func (r *Reconciler) templateOf(ctx context.Context, claim *extv1beta1.SandboxClaim) (*extv1beta1.SandboxTemplate, error) {
	name := claim.TemplateName()
	if name == "" {
		policy := claim.EffectiveWarmPool()
		if policy == extv1beta1.WarmPoolPolicyNone || policy == extv1beta1.WarmPoolPolicyDefault {
			return nil, &userError{extv1beta1.ReasonTemplateNotFound,
				"the claim names neither a SandboxTemplate (sandboxTemplateRef) nor a warm pool"}
		}
		pool := &extv1beta1.SandboxWarmPool{}
		err := r.client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: string(policy)}, pool)
		if apierrors.IsNotFound(err) {
			return nil, &userError{extv1beta1.ReasonWarmPoolNotFound,
				fmt.Sprintf("SandboxWarmPool %q not found; the claim proceeds once it exists", policy)}
		}
		if err != nil {
			return nil, err
		}
		name = pool.Spec.TemplateRef.Name
	}
	tmpl := &extv1beta1.SandboxTemplate{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: name}, tmpl)
	if apierrors.IsNotFound(err) {
		return nil, &userError{extv1beta1.ReasonTemplateNotFound,
			fmt.Sprintf("SandboxTemplate %q not found; the claim proceeds once it exists", name)}
	}
	if err != nil {
		return nil, err
	}
	return tmpl, nil
}

// poolCreated passes only pool creations: a claim waiting for a pool it names (WarmPoolNotFound)
// proceeds once the pool exists.
var poolCreated = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return true },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// unboundClaimsOfPool wakes the unbound claims that name a pool that just appeared.
func (r *Reconciler) unboundClaimsOfPool(ctx context.Context, o client.Object) []reconcile.Request {
	return r.unboundClaims(ctx, o.GetNamespace(), client.MatchingFields{index.ClaimWarmPool: o.GetName()})
}
