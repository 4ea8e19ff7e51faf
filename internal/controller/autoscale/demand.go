// Package autoscale sizes warm pools from the rate at which claims arrive: the claim controller
// counts, in memory, the claims each pool served or could have served (Demand), and the pool
// controller turns that rate into a size (Decide), growing at once and shrinking slowly.
package autoscale

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// MaxWindow is the longest window a rate is asked over (the API's bound on spec.autoscaling.window);
// older counts are dropped.
const MaxWindow = time.Hour

// wakeEvery bounds how often claims wake a pool: a burst of claims needs one re-evaluation, not
// one per claim.
const wakeEvery = time.Second

// Demand counts, per pool, the claims the pool served or could have served, in one-second
// buckets over the last MaxWindow. It lives in the controller process: a restart starts it
// empty (the pool controller then leans on the pool's status, see Observation.Covered).
type Demand struct {
	clock   clock.PassiveClock
	started time.Time

	mu    sync.Mutex
	pools map[types.NamespacedName]*series
	wake  chan types.NamespacedName
}

// series is one pool's counts, oldest bucket first.
type series struct {
	buckets []bucket
	last    time.Time // the last claim
	woken   time.Time // the last wake sent
}

type bucket struct {
	second int64 // Unix seconds
	n      int
}

// NewDemand returns an empty counter telling the time by clk (the real clock when nil).
func NewDemand(clk clock.PassiveClock) *Demand {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Demand{clock: clk, started: clk.Now(), pools: map[types.NamespacedName]*series{},
		wake: make(chan types.NamespacedName, 256)}
}

// Record counts one claim for pool now. A nil Demand records nothing.
func (d *Demand) Record(pool types.NamespacedName) {
	if d == nil {
		return
	}
	now := d.clock.Now()
	d.mu.Lock()
	s, ok := d.pools[pool]
	if !ok {
		s = &series{}
		d.pools[pool] = s
	}
	sec := now.Unix()
	if n := len(s.buckets); n > 0 && s.buckets[n-1].second == sec {
		s.buckets[n-1].n++
	} else {
		s.buckets = append(s.buckets, bucket{second: sec, n: 1})
	}
	s.prune(now)
	s.last = now
	wake := now.Sub(s.woken) >= wakeEvery
	if wake {
		s.woken = now
	}
	d.mu.Unlock()
	if wake {
		select {
		case d.wake <- pool:
		default: // the pool's own timer re-evaluates it soon anyway
		}
	}
}

// prune drops the buckets older than MaxWindow.
func (s *series) prune(now time.Time) {
	oldest := now.Add(-MaxWindow).Unix()
	i := 0
	for i < len(s.buckets) && s.buckets[i].second <= oldest {
		i++
	}
	s.buckets = s.buckets[i:]
}

// Observation is what Demand saw of one pool.
type Observation struct {
	// Rate is claims per second: the higher of the rate over the window and over its last sixth,
	// so that a step up shows within seconds while a step down fades over the whole window.
	Rate float64
	// LastClaim is when the last claim was counted (zero: none since the process started).
	LastClaim time.Time
	// Covered: the process has counted for the whole window; until then the part of the window
	// before it started is taken at the prior rate.
	Covered bool
}

// Observe returns the pool's claim rate over window, as of now. prior is the rate to assume
// for the part of the window before this process started counting (the last rate the pool's
// status reported), so a restart neither forgets the load nor holds on to it.
func (d *Demand) Observe(pool types.NamespacedName, window time.Duration, prior float64) Observation {
	window = min(max(window, time.Second), MaxWindow)
	now := d.clock.Now()
	seen := min(now.Sub(d.started), window)
	o := Observation{Covered: seen >= window}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.pools[pool]
	if !ok {
		s = &series{}
	}
	o.LastClaim = s.last
	long := s.rate(now, max(seen, time.Second))
	if !o.Covered {
		long = (long*seen.Seconds() + prior*(window-seen).Seconds()) / window.Seconds()
	}
	o.Rate = max(long, s.rate(now, max(window/6, time.Second)))
	return o
}

// rate is the claims per second over the span ending now: its whole seconds and the part of
// the current one gone by, so a claim counts from the moment it is recorded.
func (s *series) rate(now time.Time, span time.Duration) float64 {
	secs := int64(span.Round(time.Second) / time.Second)
	from := now.Unix() - secs
	n := 0
	for i := len(s.buckets) - 1; i >= 0 && s.buckets[i].second >= from; i-- {
		n += s.buckets[i].n
	}
	partial := now.Sub(now.Truncate(time.Second)).Seconds()
	return float64(n) / (float64(secs) + partial)
}

// Forget drops a deleted pool's counts.
func (d *Demand) Forget(pool types.NamespacedName) {
	if d == nil {
		return
	}
	d.mu.Lock()
	delete(d.pools, pool)
	d.mu.Unlock()
}

// Wakes is a controller source that queues a pool when claims start arriving for it (at most
// once a second per pool), so that it grows without waiting for its timer.
func (d *Demand) Wakes() source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case pool := <-d.wake:
					q.Add(reconcile.Request{NamespacedName: pool})
				}
			}
		}()
		return nil
	})
}
