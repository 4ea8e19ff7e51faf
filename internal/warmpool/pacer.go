package warmpool

import (
	"sync"
	"time"
)

// Pacer lets pool refills yield to claims. On a small control plane the API server's CPU per
// write is the bottleneck: refills that race a claim burst slow every claim down, so the pool
// waits until claims have been quiet for a moment and then catches up.
type Pacer struct {
	mu        sync.Mutex
	lastClaim time.Time
	inFlight  int
	quiet     time.Duration
	now       func() time.Time
}

// NewPacer returns a pacer that asks refills to wait until no claim is being served and none
// arrived for quiet.
func NewPacer(quiet time.Duration) *Pacer {
	return &Pacer{quiet: quiet, now: time.Now}
}

// ClaimStarted records that a claim is being served; call the returned func when done.
func (p *Pacer) ClaimStarted() (done func()) {
	p.mu.Lock()
	p.inFlight++
	p.lastClaim = p.now()
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.inFlight--
		p.lastClaim = p.now()
		p.mu.Unlock()
	}
}

// Wait is how long a refill should hold back; zero means go.
func (p *Pacer) Wait() time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight > 0 {
		return p.quiet
	}
	if d := p.lastClaim.Add(p.quiet).Sub(p.now()); d > 0 {
		return d
	}
	return 0
}
