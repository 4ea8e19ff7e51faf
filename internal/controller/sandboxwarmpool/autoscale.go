package sandboxwarmpool

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/autoscale"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/metrics"
)

// reportEvery bounds how often status.autoscaling is rewritten only because the rate or the
// last claim time moved: each status write is a pool event and so another reconcile, and the
// rate moves with every second.
const reportEvery = 5 * time.Second

// poolMemory is what this process remembers of each autoscaled pool: its recent sizes wanted
// (the stabilization window) and when its status was last refreshed.
type poolMemory struct {
	mu       sync.Mutex
	history  map[types.NamespacedName][]autoscale.Recommendation
	reported map[types.NamespacedName]time.Time
}

func (h *poolMemory) get(pool types.NamespacedName) ([]autoscale.Recommendation, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.history[pool], h.reported[pool]
}

func (h *poolMemory) set(pool types.NamespacedName, r []autoscale.Recommendation, reported time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.history == nil {
		h.history, h.reported = map[types.NamespacedName][]autoscale.Recommendation{}, map[types.NamespacedName]time.Time{}
	}
	h.history[pool], h.reported[pool] = r, reported
}

func (h *poolMemory) forget(pool types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.history, pool)
	delete(h.reported, pool)
}

// autoscale sizes a pool that has spec.autoscaling from its claim rate: it writes spec.replicas
// (the field the scale subresource shows) when the size changes, and returns the pool's
// status.autoscaling and when to decide again. A pool without spec.autoscaling is left alone.
func (r *Reconciler) autoscale(ctx context.Context, pool *extv1beta1.SandboxWarmPool) (*extv1beta1.SandboxWarmPoolAutoscalingStatus, time.Duration, error) {
	key := client.ObjectKeyFromObject(pool)
	if pool.Spec.Autoscaling == nil {
		r.autoscaled.forget(key)
		return nil, 0, nil
	}
	policy := autoscale.PolicyOf(pool.Spec.Autoscaling)
	prev := pool.Status.Autoscaling
	if prev == nil {
		prev = &extv1beta1.SandboxWarmPoolAutoscalingStatus{}
	}
	var prior float64
	if prev.ObservedClaimRate != nil {
		prior = prev.ObservedClaimRate.AsApproximateFloat64()
	}
	seen := r.demand.Observe(key, policy.Window, prior)
	lastClaim := seen.LastClaim
	if prev.LastClaimTime != nil && prev.LastClaimTime.After(lastClaim) {
		lastClaim = prev.LastClaimTime.Time // counted before a restart
	}
	lastActivity := lastClaim
	if lastActivity.IsZero() {
		lastActivity = pool.CreationTimestamp.Time
	}
	now := r.clock.Now()
	history, reported := r.autoscaled.get(key)
	d := autoscale.Decide(autoscale.Input{Policy: policy, Now: now, Rate: seen.Rate, LastActivity: lastActivity,
		Current: pool.DesiredReplicas(), History: history})

	status := &extv1beta1.SandboxWarmPoolAutoscalingStatus{DesiredReplicas: d.Replicas,
		ObservedClaimRate: resource.NewMilliQuantity(int64(seen.Rate*1000+0.5), resource.DecimalSI),
		LastScaleTime:     prev.LastScaleTime, Reason: d.Reason, Message: d.Message}
	if !lastClaim.IsZero() {
		status.LastClaimTime = new(metav1.NewTime(lastClaim).Rfc3339Copy()) // as stored: no rewrite for nanoseconds
	}
	if prev.DesiredReplicas == d.Replicas && prev.Reason == d.Reason && now.Sub(reported) < reportEvery {
		// Same decision: the moving figures wait for the next refresh.
		status.ObservedClaimRate, status.LastClaimTime, status.Message = prev.ObservedClaimRate, prev.LastClaimTime, prev.Message
	} else {
		reported = now
	}
	r.autoscaled.set(key, d.History, reported)
	if current := pool.DesiredReplicas(); d.Replicas != current {
		log.FromContext(ctx).V(2).Info("autoscaling the pool", "from", current, "to", d.Replicas, "reason", d.Reason, "claimsPerSecond", seen.Rate)
		if err := r.setReplicas(ctx, pool, d.Replicas); err != nil {
			return nil, 0, err
		}
		metrics.RecordAutoscale(pool.Namespace, pool.Name, d.Replicas > current)
		status.LastScaleTime = new(metav1.NewTime(now).Rfc3339Copy())
	}
	return status, d.RequeueAfter, nil
}

// setReplicas writes spec.replicas, optimistically locked: a person editing the pool meanwhile
// makes it fail and the next reconcile decides again on what they wrote.
func (r *Reconciler) setReplicas(ctx context.Context, pool *extv1beta1.SandboxWarmPool, replicas int32) error {
	original := pool.DeepCopy()
	pool.Spec.Replicas = &replicas
	return r.client.Patch(ctx, pool, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}), agentsv1beta1.FieldOwner)
}
