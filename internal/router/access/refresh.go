package access

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// refreshAhead asks again, in the background, a question whose cached good answer (a token's
// user, an allow) has lived half its TTL and is still in use, so that a caller who keeps
// sending requests never waits for a review: an agent's command after a pause of a few seconds
// used to pay a TokenReview or SubjectAccessReview (10–30 ms on the local cluster) once per TTL.
// A caller silent for a whole TTL still waits. A refusal is never refreshed. The bound on a
// revoked right is unchanged: an answer is kept for its TTL and no longer, and a refresh
// that refuses replaces the allow at once.
type refreshAhead struct {
	clk   clock.PassiveClock
	after time.Duration // the age at which a hit asks again
	busy  sync.Map      // keys with a refresh under way
	wg    sync.WaitGroup
}

func newRefreshAhead(clk clock.PassiveClock, ttl time.Duration) *refreshAhead {
	return &refreshAhead{clk: clk, after: ttl / 2}
}

// answered wraps a cached value with the time it was learned.
type answered struct {
	v  any
	at time.Time
}

// stamp is v as the cache keeps it.
func (r *refreshAhead) stamp(v any) answered { return answered{v: v, at: r.clk.Now()} }

// due reports whether a cached good answer has lived long enough to be asked again.
func (r *refreshAhead) due(a answered) bool { return r.clk.Since(a.at) >= r.after }

// start runs ask in the background unless a refresh of key is under way. ask stores what it
// learns.
func (r *refreshAhead) start(key [32]byte, ask func()) {
	if _, running := r.busy.LoadOrStore(key, struct{}{}); running {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.busy.Delete(key)
		ask()
	}()
}

// wait returns when no refresh is under way (tests).
func (r *refreshAhead) wait() { r.wg.Wait() }
