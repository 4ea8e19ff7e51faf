// Package routertoken keeps, for each SandboxClaim that asks for one, a Secret holding a router
// token scoped to the claim's Sandbox: whoever can read that Secret (the claim's owner) can
// reach that one sandbox through the router, and nothing else, without a Kubernetes identity
// of its own. The token binds the Sandbox's UID, so it never opens a later Sandbox that reuses
// the name. It stays off the claim hot path: it acts only on claims carrying the annotation,
// after their status names a Sandbox.
package routertoken

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

// SecretName is the Secret holding a claim's token.
func SecretName(claim string) string { return claim + "-router-token" }

// DefaultValidity is how long a minted token lives at most; it is renewed when a third of its
// lifetime is left.
const DefaultValidity = 24 * time.Hour

// Reconciler mints and renews the tokens.
type Reconciler struct {
	client client.Client
	// apiReader reads Secrets: the manager does not cache them (they are few here and many
	// elsewhere in a cluster).
	apiReader client.Reader
	signer    *scopedtoken.Signer
	validity  time.Duration
	clock     clock.PassiveClock
}

// Options configure a Reconciler; a zero field takes its default.
type Options struct {
	// Validity is how long a minted token lives (default DefaultValidity).
	Validity time.Duration
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock
}

// New returns a reconciler that mints tokens with signer, writing through c and reading
// Secrets through apiReader.
func New(c client.Client, apiReader client.Reader, signer *scopedtoken.Signer, opts Options) *Reconciler {
	r := &Reconciler{client: c, apiReader: apiReader, signer: signer, validity: opts.Validity, clock: opts.Clock}
	if r.validity <= 0 {
		r.validity = DefaultValidity
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	return r
}

// sandboxLag is how soon a claim whose Sandbox is not in the manager's cache yet is looked at
// again: the claim's status can name a Sandbox a moment before the watch delivers it.
const sandboxLag = time.Second

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch

// Reconcile keeps the claim's token Secret current, or removes it once the claim stops asking.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &extv1beta1.SandboxClaim{}
	if err := r.client.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // the Secret goes with its owner
	}
	key := types.NamespacedName{Namespace: claim.Namespace, Name: SecretName(claim.Name)}
	current := &corev1.Secret{}
	err := r.apiReader.Get(ctx, key, current)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	found := err == nil
	if found && !metav1.IsControlledBy(current, claim) {
		return ctrl.Result{}, nil // never touch a Secret someone else made
	}
	sandbox := claim.Status.SandboxStatus.Name
	if !claim.DeletionTimestamp.IsZero() || claim.Annotations[extv1beta1.RouterTokenAnnotation] != "true" || sandbox == "" {
		if found && (claim.Annotations[extv1beta1.RouterTokenAnnotation] != "true") {
			log.FromContext(ctx).V(2).Info("the claim no longer asks for a router token: deleting its Secret", "secret", klog.KObj(current))
			return ctrl.Result{}, client.IgnoreNotFound(r.client.Delete(ctx, current, client.Preconditions{UID: &current.UID}))
		}
		return ctrl.Result{}, nil
	}
	// The token binds the Sandbox's UID, so that it never opens a later Sandbox of the same name.
	sb := &agentsv1beta1.Sandbox{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: sandbox}, sb); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// Not cached yet, or deleted: a claim never replaces a deleted Sandbox and says so in its
		// status, and that status write brings the claim back here, so polling can stop then.
		if cond := meta.FindStatusCondition(claim.Status.Conditions, extv1beta1.ClaimConditionReady); cond != nil &&
			cond.Reason == extv1beta1.ReasonSandboxMissing {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: sandboxLag}, nil
	}
	want := scopedtoken.Claims{Namespace: claim.Namespace, Name: sandbox, UID: string(sb.UID)}
	now := r.clock.Now()
	expires := r.expiry(claim, now)
	if found {
		if held, ok := r.held(current, want, now); ok {
			if renewAt := renewAt(held); now.Before(renewAt) {
				log.FromContext(ctx).V(3).Info("router token current; requeue at its renewal", "secret", klog.KObj(current), "renewAt", renewAt)
				return ctrl.Result{RequeueAfter: renewAt.Sub(now)}, nil
			}
			if !expires.After(time.Unix(held.Expires, 0)) {
				// Due, but a new token could not outlive this one (both end at the claim's
				// shutdownTime): rewriting it gains nothing. A later shutdownTime is a claim update,
				// which brings the claim back here.
				return ctrl.Result{}, nil
			}
		}
	}
	if !expires.After(now) {
		return ctrl.Result{}, nil // the claim is at its end; its expiry handles the rest
	}
	want.IssuedAt, want.Expires = now.Unix(), expires.Unix()
	if err := r.writeToken(ctx, claim, sb, current, found, want); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: max(renewAt(want).Sub(now), time.Second)}, nil
}

// writeToken mints want and writes it into the claim's Secret: an update of current when found,
// else a create.
func (r *Reconciler) writeToken(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox,
	current *corev1.Secret, found bool, want scopedtoken.Claims) error {
	tok, err := r.signer.Mint(want)
	if err != nil {
		return err
	}
	expires := time.Unix(want.Expires, 0)
	desired := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName(claim.Name), Namespace: claim.Namespace, Labels: map[string]string{extv1beta1.RouterTokenSecretLabel: "true"}},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{extv1beta1.RouterTokenKeyToken: []byte(tok), extv1beta1.RouterTokenKeyNamespace: []byte(claim.Namespace),
			extv1beta1.RouterTokenKeySandbox: []byte(sb.Name), extv1beta1.RouterTokenKeyExpires: []byte(expires.UTC().Format(time.RFC3339))},
	}
	if err := controllerutil.SetControllerReference(claim, desired, r.client.Scheme()); err != nil {
		return err
	}
	if found {
		desired.ResourceVersion = current.ResourceVersion
		err = r.client.Update(ctx, desired)
	} else {
		err = r.client.Create(ctx, desired)
	}
	if err != nil {
		return fmt.Errorf("writing router token Secret %s: %w", desired.Name, err)
	}
	// Never the token itself: it opens the Sandbox.
	log.FromContext(ctx).V(2).Info("minted a router token", "secret", klog.KObj(desired), "sandbox", klog.KObj(sb),
		"expires", expires.UTC(), "renewAt", renewAt(want))
	return nil
}

// expiry is the token's end: the validity from now, but never past the claim's shutdownTime.
func (r *Reconciler) expiry(claim *extv1beta1.SandboxClaim, now time.Time) time.Time {
	exp := now.Add(r.validity).Truncate(time.Second)
	if lc := claim.Spec.Lifecycle; lc != nil && lc.ShutdownTime != nil && lc.ShutdownTime.Time.Before(exp) {
		exp = lc.ShutdownTime.Time.Truncate(time.Second)
	}
	return exp
}

// held returns the claims of the Secret's token when it still verifies and opens the Sandbox
// want names (the same object, by UID). A token signed with a rotated secret, expired, minted
// before tokens bound a UID, or for another Sandbox is replaced at once.
func (r *Reconciler) held(s *corev1.Secret, want scopedtoken.Claims, now time.Time) (scopedtoken.Claims, bool) {
	c, err := r.signer.Verify(string(s.Data[extv1beta1.RouterTokenKeyToken]), now)
	if err != nil || c.Namespace != want.Namespace || c.Name != want.Name || c.UID != want.UID {
		return scopedtoken.Claims{}, false
	}
	return c, true
}

// renewAt is when a third of the token's own lifetime, from its issue to its expiry, is left.
// The lifetime is shorter than the validity when the claim's shutdownTime caps it; a token
// without an issue time is due at once.
func renewAt(c scopedtoken.Claims) time.Time {
	exp := time.Unix(c.Expires, 0)
	if c.IssuedAt == 0 || c.IssuedAt >= c.Expires {
		return time.Time{}
	}
	return exp.Add(-exp.Sub(time.Unix(c.IssuedAt, 0)) / 3)
}

// asksOrAsked passes claims that carry the annotation, or carried it before this update (so
// that taking it off removes the Secret); every other claim never reaches this controller.
func asksOrAsked() predicate.Predicate {
	asks := func(o client.Object) bool {
		return o != nil && o.GetAnnotations()[extv1beta1.RouterTokenAnnotation] != ""
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return asks(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return asks(e.ObjectOld) || asks(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(e event.GenericEvent) bool { return asks(e.Object) },
	}
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&extv1beta1.SandboxClaim{}, builder.WithPredicates(asksOrAsked())).
		Named("routertoken").
		Complete(r)
}
