package pacer

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Hold remembers key, whose work Wait held back, so that Release hands it back once the gate
// opens. It reports whether Release will: when it will not (no controller started it), the
// caller must come back by itself.
func (g *Gate) Hold(key types.NamespacedName) bool {
	if g == nil || !g.releasing.Load() {
		return false
	}
	g.mu.Lock()
	if g.held == nil {
		g.held = map[types.NamespacedName]struct{}{}
	}
	if len(g.held) == 0 {
		g.batchSince = g.timers.Now()
	}
	g.held[key] = struct{}{}
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	return true
}

// Release is a controller source that queues every held key once the claims are quiet, or once
// the oldest has been held maxHold: held work wakes when the gate opens instead of polling it
// (a held Sandbox used to reconcile every quiet interval, 250 ms, for a whole burst).
func (g *Gate) Release() source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		g.releasing.Store(true)
		go func() {
			defer g.releasing.Store(false)
			g.releaseLoop(ctx, func(k types.NamespacedName) { q.Add(reconcile.Request{NamespacedName: k}) })
		}()
		return nil
	})
}

func (g *Gate) releaseLoop(ctx context.Context, add func(types.NamespacedName)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.wake:
		}
		for d := g.untilRelease(); d > 0; d = g.untilRelease() {
			t := g.timers.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
		for _, k := range g.takeHeld() {
			add(k)
		}
	}
}

// untilRelease is how long the held keys still wait: until the claims are quiet, at most until
// the oldest has waited maxHold.
func (g *Gate) untilRelease() time.Duration {
	if g.pacer == nil {
		return 0
	}
	busy := g.pacer.busyFor()
	g.mu.Lock()
	defer g.mu.Unlock()
	if busy == 0 || len(g.held) == 0 {
		return 0
	}
	return min(busy, g.maxHold-g.timers.Since(g.batchSince))
}

func (g *Gate) takeHeld() []types.NamespacedName {
	g.mu.Lock()
	defer g.mu.Unlock()
	keys := make([]types.NamespacedName, 0, len(g.held))
	for k := range g.held {
		keys = append(keys, k)
	}
	clear(g.held)
	return keys
}
