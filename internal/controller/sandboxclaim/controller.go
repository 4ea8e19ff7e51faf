// Package sandboxclaim gives each SandboxClaim a Sandbox: adopted from a warm pool when one is
// ready (the fast path), otherwise created from the claim's template.
package sandboxclaim

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/autoscale"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/expectations"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/pacer"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/warmqueue"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
)

// DefaultWorkers is how many claims are reconciled in parallel unless Options say otherwise.
const DefaultWorkers = 32

// Options configure a Reconciler; a zero field takes its default.
type Options struct {
	// Recorder receives events (default: dropped).
	Recorder record.EventRecorder
	// Queue is the warm queue adoption pops from (default: a new, private one).
	Queue *warmqueue.Queue
	// Pacer learns when claims are being served, so background work yields (nil: nobody yields).
	Pacer *pacer.Pacer
	// Workers bounds parallel reconciles (default DefaultWorkers).
	Workers int
	// Blueprint builds cold Sandboxes from templates (pod metadata rules, default runtime
	// class); its pod rules also refuse claim pod metadata that is reserved or poses as the
	// router.
	Blueprint blueprint.Builder
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock
	// TracerProvider traces claims as they start (tracing.go); nil or the no-op provider: off.
	TracerProvider trace.TracerProvider
	// Demand counts, per pool, the claims it served or could have served, for autoscaled
	// pools (nil: not counted).
	Demand *autoscale.Demand
}

// Reconciler binds claims to Sandboxes and mirrors their state.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  record.EventRecorder
	queue     *warmqueue.Queue
	pacer     *pacer.Pacer
	workers   int
	blueprint blueprint.Builder
	clock     clock.PassiveClock
	tracer    trace.Tracer // nil: tracing off
	demand    *autoscale.Demand

	// firstSeen: claim namespace/name -> when this process first saw the claim without a
	// Sandbox; awaitingReady: claim namespace/name -> *awaitingReady (metrics.go).
	firstSeen, awaitingReady sync.Map
	// bindings remember, per claim (and its UID), the Sandbox this process gave it until the
	// cache shows that ownership: a reconcile running on a cache that lags its own writes must
	// not hand the claim a second Sandbox.
	bindings *expectations.Store[types.UID, *agentsv1beta1.Sandbox]
	// written remembers the last status written per claim until the cache shows it (see
	// writeStatus).
	written *expectations.Store[types.UID, *extv1beta1.SandboxClaimStatus]
}

// New returns a claim reconciler that reads through c (the cache) and, where the cache cannot
// be trusted, apiReader (the API server).
func New(c client.Client, apiReader client.Reader, opts Options) *Reconciler {
	r := &Reconciler{
		client: c, apiReader: apiReader, recorder: opts.Recorder, queue: opts.Queue, pacer: opts.Pacer,
		workers: opts.Workers, blueprint: opts.Blueprint, clock: opts.Clock, demand: opts.Demand,
		tracer: tracing.Tracer(opts.TracerProvider, "controller/sandboxclaim"),
	}
	if r.recorder == nil {
		r.recorder = &record.FakeRecorder{} // drops events (its channel is nil)
	}
	if r.queue == nil {
		r.queue = warmqueue.NewQueue()
	}
	if r.workers <= 0 {
		r.workers = DefaultWorkers
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	r.bindings = expectations.New[types.UID, *agentsv1beta1.Sandbox](r.clock, expectations.CacheLag)
	r.written = expectations.New[types.UID, *extv1beta1.SandboxClaimStatus](r.clock, expectations.CacheLag)
	return r
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
// The status is written once, at the end; events and follow-up writes come after it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &extv1beta1.SandboxClaim{}
	if err := r.client.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !claim.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	r.seen(claim)
	ctx, span := r.traceReconcile(ctx, claim)
	defer span.End()
	r.catchUpStatus(claim)
	p := &pass{claim: claim, original: claim.DeepCopy()}
	result, err := r.reconcile(ctx, p)
	if !p.claimDeleted {
		if serr := r.writeStatus(ctx, p.original, claim); serr != nil {
			return ctrl.Result{}, serr
		}
		r.observeFirstReady(ctx, claim, p.sandbox)
	}
	p.emit(r.recorder)
	if err == nil && p.afterWrite != nil {
		err = p.afterWrite(ctx)
	}
	return result, err
}

// reconcile is one pass over a claim: it finds or acquires the claim's Sandbox, or expires the
// claim, and sets the claim's status to match.
func (r *Reconciler) reconcile(ctx context.Context, p *pass) (ctrl.Result, error) {
	claim := p.claim
	sb, err := r.boundSandbox(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if at, due := expiry(claim, r.clock.Now()); due {
		log.FromContext(ctx).V(2).Info("claim expired", "at", at, "sandbox", klog.KObj(sb))
		return ctrl.Result{}, r.expire(ctx, p, sb, at)
	}
	if sb == nil && claim.Status.SandboxStatus.Name != "" {
		// The status names a Sandbox the cache does not show as ours: ask the API server.
		if sb, err = r.liveSandbox(ctx, claim); err != nil {
			return ctrl.Result{}, err
		}
		if sb == nil {
			log.FromContext(ctx).V(2).Info("the claim's sandbox is gone; reporting it missing",
				"sandbox", klog.KRef(claim.Namespace, claim.Status.SandboxStatus.Name))
			setSandboxMissing(claim)
			return ctrl.Result{}, nil
		}
	}
	var got launch
	if sb == nil {
		done := r.pacer.ClaimStarted()
		actx, span := r.traceAcquire(ctx, claim)
		sb, got, err = r.acquire(actx, p)
		endAcquire(ctx, span, sb, got, err)
		done()
	}
	var uerr *userError
	switch {
	case errors.As(err, &uerr):
		// Reported on the claim, not retried: controller-runtime never sees this error.
		log.FromContext(ctx).V(2).Info("claim cannot be served as written", "reason", uerr.reason, "message", uerr.message)
		setUserError(claim, uerr)
		return ctrl.Result{}, nil
	case err != nil:
		setReconcileError(claim, err)
		return ctrl.Result{}, err
	}
	if got.kind != "" {
		r.launched(ctx, claim, sb, got)
		r.bindings.Expect(client.ObjectKeyFromObject(claim), claim.UID, sb.DeepCopy())
	}
	p.sandbox = sb
	mirrorSandbox(claim, sb)
	if becameExpired(p.original, claim) {
		// The claim outlives its expired Sandbox (shutdownPolicy Retain, the default): say so
		// where its owner looks, once.
		p.event(corev1.EventTypeNormal, agentsv1beta1.ReasonExpired,
			"Sandbox %q expired and was retained; this claim stays until it is deleted", sb.Name)
	}
	if at, _ := expiry(claim, r.clock.Now()); !at.IsZero() {
		log.FromContext(ctx).V(2).Info("requeue at the claim's expiry", "at", at)
		return ctrl.Result{RequeueAfter: max(at.Sub(r.clock.Now()), time.Millisecond)}, nil
	}
	return ctrl.Result{}, nil
}

// boundSandbox finds the claim's Sandbox: the one its status names, else any Sandbox it
// controls (a crash between adopting and writing status leaves exactly that).
func (r *Reconciler) boundSandbox(ctx context.Context, claim *extv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	key := client.ObjectKeyFromObject(claim)
	if mine, ok := r.bindings.Get(key, claim.UID); ok {
		cached := &agentsv1beta1.Sandbox{}
		err := r.client.Get(ctx, client.ObjectKeyFromObject(mine), cached)
		switch {
		case err == nil && ownedBy(cached, claim):
			r.bindings.Observed(key, claim.UID) // the cache caught up
			return cached, nil
		case err == nil || apierrors.IsNotFound(err):
			// The cache has not seen our write yet (or not the create): trust what we wrote.
			return mine.DeepCopy(), nil
		default:
			return nil, err
		}
	}
	if name := claim.Status.SandboxStatus.Name; name != "" {
		sb := &agentsv1beta1.Sandbox{}
		err := r.client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: name}, sb)
		if err == nil && ownedBy(sb, claim) {
			return sb, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	list := &agentsv1beta1.SandboxList{}
	if err := r.client.List(ctx, list, client.InNamespace(claim.Namespace),
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
func (r *Reconciler) liveSandbox(ctx context.Context, claim *extv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	sb := &agentsv1beta1.Sandbox{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Status.SandboxStatus.Name}, sb)
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

// SetupWithManager registers the reconciler. Sandbox events do double duty: they re-trigger
// the owning claim, and they keep the warm queue current so adoption needs no List.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&extv1beta1.SandboxClaim{}).
		Watches(&agentsv1beta1.Sandbox{}, expectations.ForgetOnDelete(
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &extv1beta1.SandboxClaim{}, handler.OnlyControllerOwner()),
			r.forgetDeletedBinding)).
		Watches(&agentsv1beta1.Sandbox{}, warmQueueFeeder(r.queue)).
		Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.unboundClaimsOfTemplate)).
		Watches(&extv1beta1.SandboxWarmPool{}, handler.EnqueueRequestsFromMapFunc(r.unboundClaimsOfPool), builder.WithPredicates(poolCreated)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers}).
		Named("sandboxclaim").
		Complete(r)
}

// forgetDeletedBinding drops the binding a deleted Sandbox answers, so its claim learns at
// once that the Sandbox is gone even if the cache never showed the adoption.
func (r *Reconciler) forgetDeletedBinding(obj client.Object) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "SandboxClaim" || !strings.HasPrefix(ref.APIVersion, extv1beta1.GroupVersion.Group+"/") {
		return
	}
	expectations.Gone(r.bindings, types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, obj.GetUID())
}

// unboundClaimsOfTemplate wakes claims waiting for a template that just appeared or changed.
func (r *Reconciler) unboundClaimsOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	return r.unboundClaims(ctx, o.GetNamespace(), client.MatchingFields{index.ClaimTemplate: o.GetName()})
}

// unboundClaims lists the claims of a namespace matching an index that no Sandbox serves yet.
func (r *Reconciler) unboundClaims(ctx context.Context, ns string, match client.MatchingFields) []reconcile.Request {
	claims := &extv1beta1.SandboxClaimList{}
	if err := r.client.List(ctx, claims, client.InNamespace(ns), match); err != nil {
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

// forget drops what this process remembers of a deleted claim.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.firstSeen.Delete(key)
	r.awaitingReady.Delete(key)
	r.bindings.Forget(key)
	r.written.Forget(key)
}
