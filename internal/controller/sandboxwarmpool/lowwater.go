package sandboxwarmpool

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
)

// The refill yields to claims (the gate) so a burst gets the API server first, and a pool with
// stock to spare loses nothing by waiting. A pool near empty does: under a steady stream of
// claims the gate's trickle (a few members per hold) is slower than the claims, the pool drains
// and every claim after goes cold, which costs each of them a whole sandbox start and the API
// server more than the refill would have. So below its low water mark a pool refills at full
// speed, claims or not.

// lowWaterFraction: a pool is low below 1/lowWaterFraction of its replicas.
const lowWaterFraction = 5

// belowLowWater reports whether have members are too few for a pool of desired to wait.
func belowLowWater(have, desired int) bool { return have*lowWaterFraction < desired }

// lowWaterRecheck is how long a pool's low water answer stands while claims hold the refill
// back: during a burst every adoption is a pool event, and counting a large pool's members on
// each would cost the controller more than the answer is worth.
const lowWaterRecheck = 500 * time.Millisecond

// lowWaterMemo remembers each pool's last low water answer and when it was found.
type lowWaterMemo struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]lowWaterAnswer
}

func (m *lowWaterMemo) forget(pool types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seen, pool)
}

type lowWaterAnswer struct {
	low bool
	at  time.Time
}

// runningLow reports whether the pool's live members, counted in the cache, are below its low
// water mark (at most once per lowWaterRecheck); an error counts as not low (the gate decides).
func (r *Reconciler) runningLow(ctx context.Context, pool *extv1beta1.SandboxWarmPool) bool {
	key, now := client.ObjectKeyFromObject(pool), r.clock.Now()
	r.low.mu.Lock()
	defer r.low.mu.Unlock()
	if a, ok := r.low.seen[key]; ok && now.Sub(a.at) < lowWaterRecheck {
		return a.low
	}
	low := r.countRunningLow(ctx, pool)
	if r.low.seen == nil {
		r.low.seen = map[types.NamespacedName]lowWaterAnswer{}
	}
	r.low.seen[key] = lowWaterAnswer{low: low, at: now}
	return low
}

// countRunningLow counts the pool's live members in the cache, without copying them.
func (r *Reconciler) countRunningLow(ctx context.Context, pool *extv1beta1.SandboxWarmPool) bool {
	desired := int(pool.DesiredReplicas())
	if desired == 0 {
		return false
	}
	list := &agentsv1beta1.SandboxList{}
	err := r.client.List(ctx, list, client.InNamespace(pool.Namespace),
		client.MatchingFields{index.SandboxControllerUID: string(pool.UID)}, client.UnsafeDisableDeepCopy)
	if err != nil {
		return false
	}
	live := 0
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			live++
		}
	}
	return belowLowWater(live, desired)
}
