package pacer

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGateHoldsWorkWhileClaimsAreServed(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPacer(200 * time.Millisecond)
	p.now = func() time.Time { return now }
	g := NewGate(p, time.Second)
	if w := g.Wait(); w != 0 {
		t.Fatalf("idle gate Wait = %v, want 0", w)
	}
	done := p.ClaimStarted()
	if w := g.Wait(); w == 0 || !g.Busy() {
		t.Errorf("Wait during a claim = %v busy=%v, want a hold", w, g.Busy())
	}
	done()
	now = now.Add(100 * time.Millisecond)
	if w := g.Wait(); w != 100*time.Millisecond {
		t.Errorf("Wait 100ms after the last claim = %v, want the remaining 100ms", w)
	}
	now = now.Add(100 * time.Millisecond)
	if w := g.Wait(); w != 0 {
		t.Errorf("Wait after the quiet period = %v, want 0", w)
	}
}

func TestGateLetsWorkTrickleThroughASteadyClaimStream(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPacer(200 * time.Millisecond)
	p.now = func() time.Time { return now }
	g := NewGate(p, time.Second)
	passed := 0
	// A claim every 100 ms for 5 s: never quiet.
	for i := 0; i < 50; i++ {
		p.ClaimStarted()()
		if g.Wait() == 0 {
			passed++
		}
		now = now.Add(100 * time.Millisecond)
	}
	if passed < 4 || passed > 6 {
		t.Errorf("work went through %d times in 5 s of steady claims, want about once a second", passed)
	}
}

func TestNilGateNeverHolds(t *testing.T) {
	var g *Gate
	if g.Wait() != 0 || g.Busy() {
		t.Errorf("a nil gate held work")
	}
}

func TestANilPacerRecordsNothing(t *testing.T) {
	var p *Pacer
	done := p.ClaimStarted() // must not panic: reconcilers built without a pacer still serve claims
	done()
}
