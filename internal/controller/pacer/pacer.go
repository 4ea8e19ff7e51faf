// Package pacer holds background writes (warm pool refills, the Sandbox controller's label
// bookkeeping) back while claims are being served, so that claims get the API server first.
package pacer

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Pacer lets background writes (pool refills, label bookkeeping) yield to claims. On a small
// control plane the API server's CPU per write is the bottleneck: refills that race a claim
// burst slow every claim down, so they wait until claims have been quiet for a moment and then
// catch up.
type Pacer struct {
	mu        sync.Mutex
	lastClaim time.Time
	inFlight  int
	quiet     time.Duration
	clock     clock.PassiveClock
}

const (
	// DefaultQuiet is how long background work waits after the last claim unless configured.
	DefaultQuiet = 250 * time.Millisecond
	// DefaultMaxHold is the longest a Gate holds work back at a stretch unless configured.
	DefaultMaxHold = 2 * time.Second
)

// NewPacer returns a pacer that reports claims busy while one is being served and for quiet
// (DefaultQuiet when not positive) after the last one, as clk tells the time (the real clock
// when nil).
func NewPacer(quiet time.Duration, clk clock.PassiveClock) *Pacer {
	if quiet <= 0 {
		quiet = DefaultQuiet
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Pacer{quiet: quiet, clock: clk}
}

// ClaimStarted records that a claim is being served; call the returned func when done.
// A nil pacer records nothing.
func (p *Pacer) ClaimStarted() (done func()) {
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	p.inFlight++
	p.lastClaim = p.clock.Now()
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.inFlight--
		p.lastClaim = p.clock.Now()
		p.mu.Unlock()
	}
}

// busyFor is how long until claims count as quiet; zero when they are.
func (p *Pacer) busyFor() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight > 0 {
		return p.quiet
	}
	if d := p.lastClaim.Add(p.quiet).Sub(p.clock.Now()); d > 0 {
		return d
	}
	return 0
}

// Gate is one kind of background work held back by a Pacer, but never for longer than maxHold
// at a stretch: under a steady stream of claims (never quiet) the work still trickles through,
// so a pool serving a constant load still refills.
type Gate struct {
	pacer     *Pacer
	maxHold   time.Duration
	mu        sync.Mutex
	heldSince time.Time

	// The keys whose work Wait held back, handed back by Release (release.go).
	held       map[types.NamespacedName]struct{}
	batchSince time.Time     // when the oldest held key was held
	wake       chan struct{} // a key was held
	releasing  atomic.Bool   // Release's loop runs
	timers     clock.Clock
}

// NewGate returns a gate on p that holds work back at most maxHold at a stretch
// (DefaultMaxHold when not positive); a nil p never holds.
func NewGate(p *Pacer, maxHold time.Duration) *Gate {
	if maxHold <= 0 {
		maxHold = DefaultMaxHold
	}
	g := &Gate{pacer: p, maxHold: maxHold, wake: make(chan struct{}, 1), timers: clock.RealClock{}}
	if p != nil {
		if c, ok := p.clock.(clock.Clock); ok { // a test's fake clock also drives the release timer
			g.timers = c
		}
	}
	return g
}

// Wait is how long the work should hold back; zero means go now. When it says go while
// claims are still busy (the hold ran out), Busy is still true so the caller can keep the
// batch small.
func (g *Gate) Wait() time.Duration {
	if g == nil || g.pacer == nil {
		return 0
	}
	d := g.pacer.busyFor()
	g.mu.Lock()
	defer g.mu.Unlock()
	if d == 0 {
		g.heldSince = time.Time{}
		return 0
	}
	now := g.pacer.clock.Now()
	if g.heldSince.IsZero() {
		g.heldSince = now
	}
	if now.Sub(g.heldSince) >= g.maxHold {
		g.heldSince = now // let this one through, then hold again
		return 0
	}
	return d
}

// Busy reports whether claims are being served right now.
func (g *Gate) Busy() bool {
	return g != nil && g.pacer != nil && g.pacer.busyFor() > 0
}
