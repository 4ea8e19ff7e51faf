package autoscale

import (
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var poolA = types.NamespacedName{Namespace: "ns", Name: "a"}

// claims records n claims for poolA, spread evenly over d, then leaves the clock at the end.
func claims(d *Demand, clk *clocktesting.FakeClock, n int, over time.Duration) {
	for range n {
		d.Record(poolA)
		clk.Step(over / time.Duration(n))
	}
}

func TestDemandObserve(t *testing.T) {
	cases := []struct {
		name        string
		run         func(d *Demand, clk *clocktesting.FakeClock)
		window      time.Duration
		prior       float64
		wantRate    float64
		wantCovered bool
		wantLast    bool
	}{
		{"no claims: rate 0, no last claim",
			func(*Demand, *clocktesting.FakeClock) {}, time.Minute, 0, 0, false, false},
		{"5/s for a whole minute reads 5/s over a 60 s window",
			func(d *Demand, clk *clocktesting.FakeClock) { claims(d, clk, 300, time.Minute) }, time.Minute, 0, 5, true, true},
		{"a step from 5/s to 50/s shows within 10 s (the window's last sixth)",
			func(d *Demand, clk *clocktesting.FakeClock) {
				claims(d, clk, 250, 50*time.Second)
				claims(d, clk, 500, 10*time.Second)
			}, time.Minute, 0, 50, true, true},
		{"a step down fades over the window",
			func(d *Demand, clk *clocktesting.FakeClock) {
				claims(d, clk, 1500, 30*time.Second)
				claims(d, clk, 150, 30*time.Second)
			}, time.Minute, 0, 27.5, true, true},
		{"claims older than the window no longer count",
			func(d *Demand, clk *clocktesting.FakeClock) {
				claims(d, clk, 100, 10*time.Second)
				clk.Step(2 * time.Minute)
			}, time.Minute, 0, 0, true, true},
		{"a process younger than the window takes the part it has not seen at the prior rate",
			func(d *Demand, clk *clocktesting.FakeClock) { claims(d, clk, 60, 30*time.Second) }, time.Minute, 6, 4, false, true},
		{"after a restart the status's last rate fades as the window fills with quiet",
			func(_ *Demand, clk *clocktesting.FakeClock) { clk.Step(45 * time.Second) }, time.Minute, 20, 5, false, false},
		{"a burst right after a restart shows at once, whatever the prior",
			func(d *Demand, clk *clocktesting.FakeClock) { claims(d, clk, 100, 10*time.Second) }, time.Minute, 1, 10, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			d := NewDemand(clk)
			tc.run(d, clk)
			o := d.Observe(poolA, tc.window, tc.prior)
			if math.Abs(o.Rate-tc.wantRate) > 0.05*tc.wantRate+0.2 {
				t.Errorf("Rate = %.2f/s, want about %.2f/s", o.Rate, tc.wantRate)
			}
			if o.Covered != tc.wantCovered {
				t.Errorf("Covered = %t, want %t", o.Covered, tc.wantCovered)
			}
			if o.LastClaim.IsZero() == tc.wantLast {
				t.Errorf("LastClaim = %v, want one: %t", o.LastClaim, tc.wantLast)
			}
		})
	}
}

func TestDemandForgetAndOtherPools(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	d := NewDemand(clk)
	other := types.NamespacedName{Namespace: "ns", Name: "b"}
	claims(d, clk, 10, time.Second)
	if o := d.Observe(other, time.Minute, 0); o.Rate != 0 || !o.LastClaim.IsZero() {
		t.Errorf("another pool observes %+v, want nothing: counts are per pool", o)
	}
	d.Forget(poolA)
	if o := d.Observe(poolA, time.Minute, 0); o.Rate != 0 {
		t.Errorf("a forgotten pool observes %.2f/s, want 0", o.Rate)
	}
}

func TestDemandWakesAPoolAtMostOnceASecond(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	d := NewDemand(clk)
	claims(d, clk, 50, 2*time.Second) // 25/s for 2 s
	if got := len(d.wake); got != 2 {
		t.Errorf("%d wakes queued for 2 s of claims, want 2", got)
	}
}
