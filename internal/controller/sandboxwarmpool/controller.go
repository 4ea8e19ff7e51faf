// Package sandboxwarmpool keeps a SandboxWarmPool's number of ready, unclaimed Sandboxes.
package sandboxwarmpool

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/autoscale"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/pacer"
)

// trickleBatch bounds a refill that goes through while claims are still being served.
const trickleBatch = 5

// DefaultMaxBatch bounds the creates or deletes of one reconcile unless Options say otherwise.
const DefaultMaxBatch = 50

// Options configure a Reconciler; a zero field takes its default.
type Options struct {
	// Recorder receives events (default: dropped).
	Recorder record.EventRecorder
	// Gate holds refills back while claims are being served (nil: never); when its hold runs
	// out under a steady claim stream, refills go through in small batches.
	Gate *pacer.Gate
	// MaxBatch bounds the creates or deletes of one reconcile (default DefaultMaxBatch).
	MaxBatch int
	// Blueprint builds members from the template (pod metadata rules, default runtime class).
	Blueprint blueprint.Builder
	// MemberReadyTimeout is how long a member may stay not Ready (unless unschedulable) before
	// it is replaced (default DefaultMemberReadyTimeout).
	MemberReadyTimeout time.Duration
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock
	// Demand is the claim rate per pool the claim controller counts, which sizes pools with
	// spec.autoscaling (default: a counter nobody feeds, so those pools see no claims).
	Demand *autoscale.Demand
}

// Reconciler keeps spec.replicas Sandboxes built from the pool's template.
type Reconciler struct {
	client             client.Client
	recorder           record.EventRecorder
	gate               *pacer.Gate
	maxBatch           int
	blueprint          blueprint.Builder
	memberReadyTimeout time.Duration
	clock              clock.PassiveClock
	demand             *autoscale.Demand

	expect     *memberWrites
	autoscaled poolMemory // autoscaled pools' recent sizes wanted and status refreshes
	low        lowWaterMemo
}

// New returns a pool reconciler reading and writing through c.
func New(c client.Client, opts Options) *Reconciler {
	r := &Reconciler{
		client: c, recorder: opts.Recorder, gate: opts.Gate, maxBatch: opts.MaxBatch, blueprint: opts.Blueprint,
		memberReadyTimeout: opts.MemberReadyTimeout, clock: opts.Clock, demand: opts.Demand,
	}
	if r.recorder == nil {
		r.recorder = &record.FakeRecorder{} // drops events (its channel is nil)
	}
	if r.maxBatch <= 0 {
		r.maxBatch = DefaultMaxBatch
	}
	if r.memberReadyTimeout <= 0 {
		r.memberReadyTimeout = DefaultMemberReadyTimeout
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.demand == nil {
		r.demand = autoscale.NewDemand(r.clock)
	}
	r.expect = newMemberWrites(r.clock)
	return r
}

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/finalizers,verbs=update
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes/ownership;sandboxes/network,verbs=update

// Reconcile creates, replaces and removes members until the pool matches its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &extv1beta1.SandboxWarmPool{}
	if err := r.client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.expect.forget(req.NamespacedName)
			r.low.forget(req.NamespacedName)
			r.autoscaled.forget(req.NamespacedName)
			r.demand.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if wait := r.gate.Wait(); wait > 0 && !r.runningLow(ctx, pool) {
		// Claims are being served: everything below (refill, status) waits, and so does the
		// cost of looking at every member, unless the pool is near empty (lowwater.go).
		log.FromContext(ctx).V(2).Info("refill held back while claims are being served", "requeueAfter", wait)
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	// Sizing first, so the refill below aims at the new size.
	auto, resize, err := r.autoscale(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	members, err := r.members(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	tmpl := &extv1beta1.SandboxTemplate{}
	err = r.client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.TemplateRef.Name}, tmpl)
	if apierrors.IsNotFound(err) {
		// Keep reporting what exists; the template watch brings us back when it appears.
		log.FromContext(ctx).V(2).Info("template not found; reporting the members there are, creating none", "template", pool.Spec.TemplateRef.Name)
		r.recorder.Eventf(pool, corev1.EventTypeWarning, extv1beta1.ReasonPoolTemplateNotFound, "SandboxTemplate %q not found", pool.Spec.TemplateRef.Name)
		m := classify(pool, members, nil, r.blueprint, r.expect)
		return ctrl.Result{RequeueAfter: resize}, r.writeStatus(ctx, pool, m, assess(m.active, r.clock.Now(), r.readyTimeoutOf(pool)), auto, false)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	m := classify(pool, members, tmpl, r.blueprint, r.expect)

	var errs []error
	if len(m.edited) > 0 {
		errs = append(errs, r.replaceEdited(ctx, pool, m.edited))
		m = classify(pool, members, tmpl, r.blueprint, r.expect)
	}
	if pool.EffectiveUpdateStrategy() == extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType && len(m.stale) > 0 {
		log.FromContext(ctx).V(2).Info("replacing members built from an older template (Recreate)", "sandboxes", klog.KObjSlice(m.stale))
		errs = append(errs, r.deleteMembers(ctx, pool, m.stale))
		m = classify(pool, members, tmpl, r.blueprint, r.expect)
	}
	h := assess(m.active, r.clock.Now(), r.readyTimeoutOf(pool))
	if len(h.unschedulable) > 0 {
		// Replacing them would not help: say so, keep them, let the scheduler place them.
		log.FromContext(ctx).V(2).Info("members cannot be scheduled; keeping them", "sandboxes", klog.KObjSlice(h.unschedulable))
		r.recorder.Eventf(pool, corev1.EventTypeWarning, extv1beta1.ReasonMembersUnschedulable,
			"%d warm sandboxes cannot be scheduled; they are kept, not replaced", len(h.unschedulable))
	}
	if len(h.overdue) > 0 {
		log.FromContext(ctx).V(2).Info("replacing members not Ready in time", "sandboxes", klog.KObjSlice(h.overdue), "timeout", r.readyTimeoutOf(pool))
		errs = append(errs, r.replaceOverdue(ctx, pool, h.overdue))
		m = classify(pool, members, tmpl, r.blueprint, r.expect)
	}
	errs = append(errs, r.scale(ctx, req.NamespacedName, pool, tmpl, m))
	errs = append(errs, r.writeStatus(ctx, pool, m, h, auto, true))
	// Come back when the next starting member crosses the timeout (member events do the rest),
	// and, autoscaled, when the size is due another look (a shrink needs no event).
	if h.nextDue > 0 {
		log.FromContext(ctx).V(2).Info("requeue when the next starting member is due Ready", "requeueAfter", h.nextDue)
	}
	return ctrl.Result{RequeueAfter: earliest(h.nextDue, resize)}, errors.Join(errs...)
}

// scale creates or deletes members, a batch at a time, toward the pool's replicas; refills
// trickle while claims are being served.
func (r *Reconciler) scale(ctx context.Context, key types.NamespacedName, pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, m membership) error {
	desired := int(pool.DesiredReplicas())
	switch have := m.count(); {
	case have < desired:
		batch := r.maxBatch
		if r.gate.Busy() && !belowLowWater(have, desired) {
			batch = min(batch, trickleBatch)
		}
		log.FromContext(ctx).V(2).Info("scaling up", "have", have, "desired", desired, "creating", min(desired-have, batch), "claimsBusy", r.gate.Busy())
		return r.createMembers(ctx, pool, tmpl, min(desired-have, batch))
	case have > desired && r.expect.pendingCreates(key):
		log.FromContext(ctx).V(2).Info("surplus kept until the pool's own creates show in the cache", "have", have, "desired", desired)
	case have > desired:
		surplus := m.surplus(min(have-desired, r.maxBatch))
		log.FromContext(ctx).V(2).Info("scaling down", "have", have, "desired", desired, "sandboxes", klog.KObjSlice(surplus))
		return r.deleteMembers(ctx, pool, surplus)
	}
	return nil
}

func (r *Reconciler) members(ctx context.Context, pool *extv1beta1.SandboxWarmPool) ([]agentsv1beta1.Sandbox, error) {
	list := &agentsv1beta1.SandboxList{}
	err := r.client.List(ctx, list, client.InNamespace(pool.Namespace), client.MatchingFields{index.SandboxControllerUID: string(pool.UID)})
	return list.Items, err
}

// earliest is the sooner of two requeues, zero meaning none.
func earliest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func (r *Reconciler) writeStatus(ctx context.Context, pool *extv1beta1.SandboxWarmPool, m membership, h health,
	auto *extv1beta1.SandboxWarmPoolAutoscalingStatus, templateFound bool) error {
	status := extv1beta1.SandboxWarmPoolStatus{
		Replicas:           int32(len(m.active)),
		ReadyReplicas:      int32(m.ready),
		Selector:           extv1beta1.WarmPoolLabel + "=" + poolHash(pool),
		ObservedGeneration: pool.Generation,
		Conditions:         append([]metav1.Condition(nil), pool.Status.Conditions...),
		Autoscaling:        auto,
	}
	meta.SetStatusCondition(&status.Conditions, readyCondition(pool, m.ready, h, templateFound))
	if equality.Semantic.DeepEqual(pool.Status, status) {
		return nil
	}
	original := pool.DeepCopy()
	pool.Status = status
	return client.IgnoreNotFound(r.client.Status().Patch(ctx, pool, client.MergeFrom(original)))
}

// SetupWithManager registers the reconciler: member changes (including a claim taking one
// over), template edits and claims arriving for an autoscaled pool bring the pool back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&extv1beta1.SandboxWarmPool{}).
		Owns(&agentsv1beta1.Sandbox{}).
		Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfTemplate)).
		WatchesRawSource(r.demand.Wakes()).
		Named("sandboxwarmpool").
		Complete(r)
}

func (r *Reconciler) poolsOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	pools := &extv1beta1.SandboxWarmPoolList{}
	if err := r.client.List(ctx, pools, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.PoolTemplate: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pools.Items))
	for _, p := range pools.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return reqs
}

// replaceEdited deletes members whose spec was changed after the pool made them: no claim adopts
// them, so they would only hold a place in the pool.
func (r *Reconciler) replaceEdited(ctx context.Context, pool *extv1beta1.SandboxWarmPool, edited []*agentsv1beta1.Sandbox) error {
	log.FromContext(ctx).V(2).Info("replacing members whose spec was changed after the pool made them", "sandboxes", klog.KObjSlice(edited))
	r.recorder.Eventf(pool, corev1.EventTypeWarning, extv1beta1.ReasonMembersEdited,
		"%d warm sandboxes were changed after the pool made them; they are replaced, never handed out", len(edited))
	return r.deleteMembers(ctx, pool, edited)
}
