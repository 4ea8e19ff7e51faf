package pacer

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	quiet   = 200 * time.Millisecond
	maxHold = time.Second
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// world is a pacer and a gate on a fake clock, with the claim currently being served.
type world struct {
	clk       *clocktesting.FakeClock
	pacer     *Pacer
	gate      *Gate
	claimDone func()
}

// step is one thing that happens before the gate is asked; steps run in order.
type step func(w *world)

func claimStarts() step { return func(w *world) { w.claimDone = w.pacer.ClaimStarted() } }
func claimEnds() step   { return func(w *world) { w.claimDone() } }
func wait(d time.Duration) step {
	return func(w *world) { w.clk.Step(d) }
}

// askGate asks the gate once, as a caller that went ahead or held back would.
func askGate() step { return func(w *world) { w.gate.Wait() } }

func TestGateWait(t *testing.T) {
	tests := []struct {
		name     string
		steps    []step
		wantWait time.Duration
		wantBusy bool
	}{
		{name: "no claim ever: go now"},
		{name: "a claim being served holds for the quiet period", steps: []step{claimStarts()},
			wantWait: quiet, wantBusy: true},
		{name: "right after a claim ends the whole quiet period remains", steps: []step{claimStarts(), claimEnds()},
			wantWait: quiet, wantBusy: true},
		{name: "part way through the quiet period the rest remains",
			steps:    []step{claimStarts(), claimEnds(), wait(quiet / 4)},
			wantWait: quiet * 3 / 4, wantBusy: true},
		{name: "a claim's end, not its start, starts the quiet period",
			steps:    []step{claimStarts(), wait(10 * quiet), claimEnds(), wait(quiet / 2)},
			wantWait: quiet / 2, wantBusy: true},
		{name: "after the quiet period: go now", steps: []step{claimStarts(), claimEnds(), wait(quiet)}},
		{name: "a hold just short of max hold still holds",
			steps:    []step{claimStarts(), askGate(), wait(maxHold - time.Nanosecond)},
			wantWait: quiet, wantBusy: true},
		{name: "a hold that reached max hold lets one through while still busy",
			steps:    []step{claimStarts(), askGate(), wait(maxHold)},
			wantWait: 0, wantBusy: true},
		{name: "after letting one through the gate holds again",
			steps:    []step{claimStarts(), askGate(), wait(maxHold), askGate()},
			wantWait: quiet, wantBusy: true},
		{name: "a quiet moment restarts the max hold",
			steps: []step{claimStarts(), askGate(), claimEnds(), wait(quiet), askGate(),
				claimStarts(), wait(maxHold - time.Nanosecond)},
			wantWait: quiet, wantBusy: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			p := NewPacer(quiet, clk)
			w := &world{clk: clk, pacer: p, gate: NewGate(p, maxHold)}
			for _, do := range tt.steps {
				do(w)
			}
			if got := w.gate.Wait(); got != tt.wantWait {
				t.Errorf("Wait() = %v, want %v", got, tt.wantWait)
			}
			if got := w.gate.Busy(); got != tt.wantBusy {
				t.Errorf("Busy() = %v, want %v", got, tt.wantBusy)
			}
		})
	}
}

func TestGateLetsWorkTrickleThroughASteadyClaimStream(t *testing.T) {
	tests := []struct {
		name       string
		maxHold    time.Duration
		wantPassed int
	}{
		// Held from the first claim at 0 s, let through at 1, 2, 3 and 4 s.
		{name: "once per max hold", maxHold: time.Second, wantPassed: 4},
		// Let through at 2 and 4 s.
		{name: "a non-positive max hold takes the default (2 s)", maxHold: 0, wantPassed: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			p := NewPacer(quiet, clk)
			g := NewGate(p, tt.maxHold)
			passed := 0
			// A claim every 100 ms for 5 s: never quiet.
			for range 50 {
				p.ClaimStarted()()
				if g.Wait() == 0 {
					passed++
				}
				clk.Step(100 * time.Millisecond)
			}
			if passed != tt.wantPassed {
				t.Errorf("work went through %d times in 5 s of steady claims, want %d", passed, tt.wantPassed)
			}
		})
	}
}

func TestNewPacerDefaults(t *testing.T) {
	p := NewPacer(0, nil)
	if p.quiet != DefaultQuiet {
		t.Errorf("quiet = %v, want DefaultQuiet %v", p.quiet, DefaultQuiet)
	}
	if p.clock == nil {
		t.Errorf("a pacer built without a clock has none; want the real clock")
	}
}

func TestNilGateNeverHolds(t *testing.T) {
	var g *Gate
	if g.Wait() != 0 || g.Busy() {
		t.Errorf("a nil gate held work")
	}
	if g := NewGate(nil, maxHold); g.Wait() != 0 || g.Busy() {
		t.Errorf("a gate without a pacer held work")
	}
}

func TestANilPacerRecordsNothing(t *testing.T) {
	var p *Pacer
	done := p.ClaimStarted() // must not panic: reconcilers built without a pacer still serve claims
	done()
}
