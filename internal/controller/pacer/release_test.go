package pacer

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

// hold holds key a as a reconcile the gate held back would.
func hold() step { return func(w *world) { w.gate.Hold(key("a")) } }

func TestHeldKeysWaitUntilTheClaimsAreQuietOrMaxHold(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		want  time.Duration
	}{
		{name: "nothing held: nothing to wait for", steps: []step{claimStarts()}},
		{name: "held while a claim is served: the quiet period", steps: []step{claimStarts(), hold()}, want: quiet},
		{name: "held after the last claim: the rest of the quiet period",
			steps: []step{claimStarts(), claimEnds(), hold(), wait(quiet / 4)}, want: quiet * 3 / 4},
		{name: "near max hold: only what is left of it",
			steps: []step{claimStarts(), hold(), wait(maxHold - quiet/2)}, want: quiet / 2},
		{name: "quiet claims: release now", steps: []step{claimStarts(), hold(), claimEnds(), wait(quiet)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			p := NewPacer(quiet, clk)
			w := &world{clk: clk, pacer: p, gate: NewGate(p, maxHold)}
			w.gate.releasing.Store(true)
			for _, do := range tt.steps {
				do(w)
			}
			if got := w.gate.untilRelease(); got != tt.want {
				t.Errorf("held keys wait %v, want %v", got, tt.want)
			}
		})
	}
}

// Without a running release, Hold refuses the key: its caller must come back by itself.
func TestHoldWithoutAReleaseTellsTheCallerToComeBack(t *testing.T) {
	p := NewPacer(quiet, clocktesting.NewFakeClock(start))
	if NewGate(p, maxHold).Hold(key("a")) {
		t.Error("Hold took a key with no release running, want false")
	}
	var nilGate *Gate
	if nilGate.Hold(key("a")) {
		t.Error("a nil gate took a key, want false")
	}
}

// The release loop hands every held key back once, when the claims have gone quiet, and not
// before; a key held twice comes back once.
func TestTheReleaseHandsHeldKeysBackOnceWhenTheClaimsAreQuiet(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	p := NewPacer(quiet, clk)
	g := NewGate(p, maxHold)
	g.releasing.Store(true)
	released := make(chan types.NamespacedName, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.releaseLoop(ctx, func(k types.NamespacedName) { released <- k })
	}()
	defer func() {
		cancel()
		<-done
	}()

	claimDone := p.ClaimStarted()
	for _, name := range []string{"a", "b", "a"} {
		g.Hold(key(name))
	}
	waitForTimer(t, clk)
	clk.Step(quiet / 2)
	select {
	case k := <-released:
		t.Fatalf("%v released while a claim is served", k)
	case <-time.After(20 * time.Millisecond):
	}
	claimDone()
	clk.Step(quiet) // the loop's timer (a quiet period from the first hold) fires; the claims are quiet now
	var got []string
	for len(got) < 2 {
		select {
		case k := <-released:
			got = append(got, k.Name)
		case <-time.After(5 * time.Second):
			t.Fatalf("released %v within 5s of the claims going quiet, want a and b", got)
		}
	}
	select {
	case k := <-released:
		t.Errorf("%v released again", k)
	case <-time.After(20 * time.Millisecond):
	}
	slices.Sort(got)
	if strings.Join(got, ",") != "a,b" {
		t.Errorf("released %v, want a and b once each", got)
	}
}

// waitForTimer waits until the release loop sleeps on the fake clock.
func waitForTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !clk.HasWaiters(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the release loop never waited on the clock")
		}
	}
}
