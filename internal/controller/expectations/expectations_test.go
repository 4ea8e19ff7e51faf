package expectations

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	poolA = types.NamespacedName{Namespace: "ns", Name: "a"}
	poolB = types.NamespacedName{Namespace: "ns", Name: "b"}
	start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

const ttl = time.Minute

// step is one thing done to a store; steps run in order on a fake clock.
type step func(s *Store[string, int], clk *clocktesting.FakeClock)

func expect(owner types.NamespacedName, key string, v int) step {
	return func(s *Store[string, int], _ *clocktesting.FakeClock) { s.Expect(owner, key, v) }
}

func wait(d time.Duration) step {
	return func(_ *Store[string, int], clk *clocktesting.FakeClock) { clk.Step(d) }
}

func observed(owner types.NamespacedName, key string) step {
	return func(s *Store[string, int], _ *clocktesting.FakeClock) { s.Observed(owner, key) }
}

func forget(owner types.NamespacedName) step {
	return func(s *Store[string, int], _ *clocktesting.FakeClock) { s.Forget(owner) }
}

func TestGet(t *testing.T) {
	tests := []struct {
		name      string
		steps     []step
		owner     types.NamespacedName
		key       string
		wantValue int
		wantFound bool
	}{
		{name: "nothing expected", owner: poolA, key: "m1"},
		{name: "an expectation is found with its value", steps: []step{expect(poolA, "m1", 7)},
			owner: poolA, key: "m1", wantValue: 7, wantFound: true},
		{name: "expectations are per owner", steps: []step{expect(poolA, "m1", 7)}, owner: poolB, key: "m1"},
		{name: "a second expect replaces the value", steps: []step{expect(poolA, "m1", 7), expect(poolA, "m1", 8)},
			owner: poolA, key: "m1", wantValue: 8, wantFound: true},
		{name: "still found at exactly the TTL", steps: []step{expect(poolA, "m1", 7), wait(ttl)},
			owner: poolA, key: "m1", wantValue: 7, wantFound: true},
		{name: "expired after the TTL", steps: []step{expect(poolA, "m1", 7), wait(ttl + time.Nanosecond)},
			owner: poolA, key: "m1"},
		{name: "a second expect restarts the expiry",
			steps: []step{expect(poolA, "m1", 7), wait(ttl / 2), expect(poolA, "m1", 7), wait(ttl * 3 / 4)},
			owner: poolA, key: "m1", wantValue: 7, wantFound: true},
		{name: "observed is gone", steps: []step{expect(poolA, "m1", 7), observed(poolA, "m1")}, owner: poolA, key: "m1"},
		{name: "observing another key keeps this one", steps: []step{expect(poolA, "m1", 7), observed(poolA, "m2")},
			owner: poolA, key: "m1", wantValue: 7, wantFound: true},
		{name: "forgetting the owner drops its keys", steps: []step{expect(poolA, "m1", 7), forget(poolA)}, owner: poolA, key: "m1"},
		{name: "forgetting another owner keeps these", steps: []step{expect(poolA, "m1", 7), forget(poolB)},
			owner: poolA, key: "m1", wantValue: 7, wantFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			s := New[string, int](clk, ttl)
			for _, do := range tt.steps {
				do(s, clk)
			}
			v, ok := s.Get(tt.owner, tt.key)
			if v != tt.wantValue || ok != tt.wantFound {
				t.Errorf("Get(%v, %q) = %d, %v; want %d, %v", tt.owner, tt.key, v, ok, tt.wantValue, tt.wantFound)
			}
		})
	}
}

func TestSettle(t *testing.T) {
	tests := []struct {
		name        string
		steps       []step
		seen        []string
		wantPending []string
	}{
		{name: "nothing expected, nothing pending", seen: []string{"m1"}},
		{name: "unseen keys stay pending", steps: []step{expect(poolA, "m1", 1), expect(poolA, "m2", 2)},
			wantPending: []string{"m1", "m2"}},
		{name: "seen keys settle", steps: []step{expect(poolA, "m1", 1), expect(poolA, "m2", 2)},
			seen: []string{"m2"}, wantPending: []string{"m1"}},
		{name: "expired keys settle unseen",
			steps:       []step{expect(poolA, "m1", 1), wait(ttl / 2), expect(poolA, "m2", 2), wait(ttl/2 + time.Second)},
			wantPending: []string{"m2"}},
		{name: "other owners' keys are not this owner's", steps: []step{expect(poolB, "m1", 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			s := New[string, int](clk, ttl)
			for _, do := range tt.steps {
				do(s, clk)
			}
			pending := s.Settle(poolA, func(k string, _ int) bool { return slices.Contains(tt.seen, k) })
			slices.Sort(pending)
			if !slices.Equal(pending, tt.wantPending) {
				t.Errorf("Settle pending = %v, want %v", pending, tt.wantPending)
			}
			if got := s.Pending(poolA); got != len(tt.wantPending) {
				t.Errorf("Pending after Settle = %d, want %d (settled keys must be gone)", got, len(tt.wantPending))
			}
		})
	}
}

func TestSettlePassesTheExpectedValue(t *testing.T) {
	s := New[string, int](clocktesting.NewFakeClock(start), ttl)
	s.Expect(poolA, "m1", 41)
	s.Expect(poolA, "m2", 42)
	pending := s.Settle(poolA, func(_ string, v int) bool { return v == 42 })
	if !slices.Equal(pending, []string{"m1"}) {
		t.Errorf("settling the key whose value is 42 left %v pending, want [m1]", pending)
	}
}

func TestStoreHoldsOnlyOwnersWithWritesInFlight(t *testing.T) {
	s := New[string, int](clocktesting.NewFakeClock(start), ttl)
	s.Expect(poolA, "m1", 1)
	s.Expect(poolB, "m1", 1)
	s.Observed(poolA, "m1")
	s.Settle(poolB, func(string, int) bool { return true })
	if n := len(s.byOwner); n != 0 {
		t.Errorf("store holds %d owners after every write was observed, want 0", n)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := New[int, int](clocktesting.NewFakeClock(start), ttl)
	done := make(chan struct{})
	for w := 0; w < 4; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 200; i++ {
				s.Expect(poolA, i, w)
				s.Get(poolA, i)
				s.Settle(poolA, func(k, _ int) bool { return k%2 == 0 })
				s.Observed(poolA, i)
			}
		}()
	}
	for w := 0; w < 4; w++ {
		<-done
	}
	if n := s.Pending(poolA); n != 0 {
		t.Errorf("%d expectations left after every key was observed, want 0", n)
	}
}
