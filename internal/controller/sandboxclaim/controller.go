// Package sandboxclaim gives each SandboxClaim a Sandbox: adopted from a warm pool when one is
// ready (the fast path), otherwise created from the claim's template.
package sandboxclaim

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
	"github.com/agent-sandbox/agent-sandbox/internal/pacer"
	"github.com/agent-sandbox/agent-sandbox/internal/podmeta"
	"github.com/agent-sandbox/agent-sandbox/internal/warmqueue"
)

// Reconciler binds claims to Sandboxes and mirrors their state.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
	Queue     *warmqueue.Queue
	Pacer     *pacer.Pacer
	// MaxConcurrentReconciles bounds parallel reconciles (default 32).
	MaxConcurrentReconciles int
	Now                     func() time.Time
	// PodRules refuse claim pod metadata that is reserved or poses as the router, and filter
	// the template's.
	PodRules podmeta.Rules

	firstSeen sync.Map // claim namespace/name -> time the controller first saw it (latency metric)
	// bound remembers, per claim UID, the Sandbox this process gave it until the cache shows
	// that ownership: a reconcile running on a cache that lags its own writes must not hand the
	// claim a second Sandbox.
	bound sync.Map
	// written is the last status written per claim UID (see writeStatus).
	written sync.Map
}

// userError is bad input on the claim: reported as a condition, never retried in a hot loop.
type userError struct {
	reason, message string
}

func (e *userError) Error() string { return e.message }

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;create;update;patch;delete

// Reconcile gets the claim a Sandbox (once), enforces its lifecycle and mirrors its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &extv1alpha1.SandboxClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			r.firstSeen.Delete(req.NamespacedName)
			r.forgetBindings(req.NamespacedName)
			r.forgetWritten(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !claim.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	r.firstSeen.LoadOrStore(req.NamespacedName, r.now())
	original := claim.DeepCopy()

	sb, err := r.boundSandbox(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if at, due := expiry(claim, r.now()); due {
		return r.expire(ctx, claim, original, sb, at)
	}

	if sb == nil && claim.Status.SandboxStatus.Name != "" {
		// The status names a Sandbox the cache does not show as ours: ask the API server.
		if sb, err = r.liveSandbox(ctx, claim); err != nil {
			return ctrl.Result{}, err
		}
		if sb == nil {
			setSandboxMissing(claim)
			return ctrl.Result{}, r.writeStatus(ctx, original, claim)
		}
	}
	var launch string
	if sb == nil {
		done := r.Pacer.ClaimStarted()
		sb, launch, err = r.acquire(ctx, claim)
		done()
	}
	var uerr *userError
	switch {
	case errors.As(err, &uerr):
		setUserError(claim, uerr)
		return ctrl.Result{}, r.writeStatus(ctx, original, claim)
	case err != nil:
		setReconcileError(claim, err)
		if serr := r.writeStatus(ctx, original, claim); serr != nil {
			return ctrl.Result{}, serr
		}
		return ctrl.Result{}, err
	}
	if launch != "" {
		observeLaunch(launch)
		r.bound.Store(claim.UID, binding{claim: req.NamespacedName, sandbox: sb.DeepCopy(), at: r.now()})
	}
	mirrorSandbox(claim, sb)
	r.observeReady(original, claim, sb)
	if err := r.writeStatus(ctx, original, claim); err != nil {
		return ctrl.Result{}, err
	}
	if at, _ := expiry(claim, r.now()); !at.IsZero() {
		return ctrl.Result{RequeueAfter: max(at.Sub(r.now()), time.Millisecond)}, nil
	}
	return ctrl.Result{}, nil
}

// boundSandbox finds the claim's Sandbox: the one its status names, else any Sandbox it
// controls (a crash between adopting and writing status leaves exactly that).
func (r *Reconciler) boundSandbox(ctx context.Context, claim *extv1alpha1.SandboxClaim) (*agentsv1alpha1.Sandbox, error) {
	if v, ok := r.bound.Load(claim.UID); ok && r.now().Sub(v.(binding).at) < bindingTTL {
		mine := v.(binding).sandbox
		cached := &agentsv1alpha1.Sandbox{}
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(mine), cached)
		switch {
		case err == nil && ownedBy(cached, claim):
			r.bound.Delete(claim.UID) // the cache caught up
			return cached, nil
		case err == nil || apierrors.IsNotFound(err):
			// The cache has not seen our write yet (or not the create): trust what we wrote.
			return mine.DeepCopy(), nil
		default:
			return nil, err
		}
	}
	if name := claim.Status.SandboxStatus.Name; name != "" {
		sb := &agentsv1alpha1.Sandbox{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: name}, sb)
		if err == nil && ownedBy(sb, claim) {
			return sb, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	list := &agentsv1alpha1.SandboxList{}
	if err := r.Client.List(ctx, list, client.InNamespace(claim.Namespace),
		client.MatchingFields{index.SandboxControllerUID: string(claim.UID)}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// liveSandbox reads the Sandbox the claim's status names from the API server, not the cache;
// nil when it is gone, being deleted or no longer the claim's.
func (r *Reconciler) liveSandbox(ctx context.Context, claim *extv1alpha1.SandboxClaim) (*agentsv1alpha1.Sandbox, error) {
	sb := &agentsv1alpha1.Sandbox{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Status.SandboxStatus.Name}, sb)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !ownedBy(sb, claim) || !sb.DeletionTimestamp.IsZero():
		return nil, nil
	}
	return sb, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) event(claim *extv1alpha1.SandboxClaim, eventType, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(claim, eventType, reason, format, args...)
	}
}

// SetupWithManager registers the reconciler. Sandbox events do double duty: they re-trigger
// the owning claim, and they keep the warm queue current so adoption needs no List.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	workers := r.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 32
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&extv1alpha1.SandboxClaim{}).
		Owns(&agentsv1alpha1.Sandbox{}).
		Watches(&agentsv1alpha1.Sandbox{}, warmQueueFeeder(r.Queue)).
		Watches(&extv1alpha1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.unboundClaimsOfTemplate)).
		Watches(&extv1alpha1.SandboxWarmPool{}, handler.EnqueueRequestsFromMapFunc(r.unboundClaimsOfPool), builder.WithPredicates(poolCreated)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("sandboxclaim").
		Complete(r)
}

// unboundClaimsOfTemplate wakes claims waiting for a template that just appeared or changed.
func (r *Reconciler) unboundClaimsOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	return r.unboundClaims(ctx, o.GetNamespace(), client.MatchingFields{index.ClaimTemplate: o.GetName()})
}

// unboundClaims lists the claims of a namespace matching an index that no Sandbox serves yet.
func (r *Reconciler) unboundClaims(ctx context.Context, ns string, match client.MatchingFields) []reconcile.Request {
	claims := &extv1alpha1.SandboxClaimList{}
	if err := r.Client.List(ctx, claims, client.InNamespace(ns), match); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range claims.Items {
		if claims.Items[i].Status.SandboxStatus.Name == "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims.Items[i])})
		}
	}
	return reqs
}

// binding is a Sandbox this process gave a claim, remembered until the cache shows it.
type binding struct {
	claim   types.NamespacedName
	sandbox *agentsv1alpha1.Sandbox
	at      time.Time
}

// bindingTTL bounds how long a binding is trusted over the cache; the cache normally catches
// up within milliseconds.
const bindingTTL = 30 * time.Second

// forgetBindings drops the remembered binding of a deleted claim.
func (r *Reconciler) forgetBindings(key types.NamespacedName) {
	r.bound.Range(func(k, v any) bool {
		if v.(binding).claim == key {
			r.bound.Delete(k)
		}
		return true
	})
}

// forgetWritten drops the remembered status of a deleted claim.
func (r *Reconciler) forgetWritten(key types.NamespacedName) {
	r.written.Range(func(k, v any) bool {
		if v.(writtenStatus).claim == key {
			r.written.Delete(k)
		}
		return true
	})
}

// writtenStatus is the last status this process wrote for a claim.
type writtenStatus struct {
	claim  types.NamespacedName
	status *extv1alpha1.SandboxClaimStatus
}
