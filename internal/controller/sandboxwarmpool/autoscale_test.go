package sandboxwarmpool

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/autoscale"
)

var poolKey = types.NamespacedName{Namespace: "ns", Name: "pool"}

// autoscaledPool: 0–20 members, 2 s of headroom, a 10 s window, no stabilization, idle after 30 s.
func autoscaledPool(replicas int32) *extv1beta1.SandboxWarmPool {
	return thePool(replicas).Created(testNow).Autoscaling(0, 20).AutoscaleHeadroom(2).AutoscaleWindow(10 * time.Second).
		ScaleDownStabilization(0).ScaleToZeroAfter(30 * time.Second).Hub()
}

// Reconcile of an autoscaled pool: the claims counted set spec.replicas and status.autoscaling.
func TestAutoscaledPoolReconcile(t *testing.T) {
	cases := []struct {
		name         string
		pool         *extv1beta1.SandboxWarmPool
		claims       int           // recorded over the 10 s before the reconcile
		quietAfter   time.Duration // then this long without a claim
		wantReplicas int32
		wantReason   string // "" : no status.autoscaling
	}{
		{"5 claims/s with 2 s of headroom grows the pool to 10", autoscaledPool(1), 50, 0, 10, extv1beta1.AutoscaleReasonScaledUp},
		{"growth stops at maxReplicas", autoscaledPool(1), 500, 0, 20, extv1beta1.AutoscaleReasonScaledUp},
		{"a pool that has had no claim for scaleToZeroAfter goes to minReplicas", autoscaledPool(10), 50, 31 * time.Second, 0, extv1beta1.AutoscaleReasonIdle},
		{"without spec.autoscaling the claims change nothing", thePool(3).Hub(), 50, 0, 3, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRigWithDemand(t, tc.pool)
			for range tc.claims {
				g.r.demand.Record(poolKey)
				g.clock.Step(10 * time.Second / time.Duration(tc.claims))
			}
			g.clock.Step(tc.quietAfter)
			res := g.mustReconcile()
			pool := g.pool()
			if got := pool.DesiredReplicas(); got != tc.wantReplicas {
				t.Errorf("spec.replicas = %d, want %d", got, tc.wantReplicas)
			}
			a := pool.Status.Autoscaling
			if tc.wantReason == "" {
				if a != nil {
					t.Errorf("status.autoscaling = %+v, want none for a pool without spec.autoscaling", a)
				}
				return
			}
			if a == nil || a.Reason != tc.wantReason || a.DesiredReplicas != tc.wantReplicas || a.LastScaleTime == nil || a.LastClaimTime == nil {
				t.Fatalf("status.autoscaling = %+v, want reason %s, desiredReplicas %d, a last scale and a last claim time", a, tc.wantReason, tc.wantReplicas)
			}
			if res.RequeueAfter <= 0 {
				t.Errorf("RequeueAfter = %s, want a timer: a shrink comes without any event", res.RequeueAfter)
			}
		})
	}
}

// After a restart the counter is empty: the rate and last claim the status kept carry on, so
// the pool neither shrinks nor goes idle for want of memory.
func TestAutoscaledPoolCarriesOnFromItsStatusAfterARestart(t *testing.T) {
	pool := autoscaledPool(10)
	pool.Status.Autoscaling = &extv1beta1.SandboxWarmPoolAutoscalingStatus{DesiredReplicas: 10,
		ObservedClaimRate: new(resource.MustParse("5")), LastClaimTime: new(metav1.NewTime(testNow.Add(-time.Second)))}
	g := newRigWithDemand(t, pool)
	g.mustReconcile()
	if got := g.pool().DesiredReplicas(); got != 10 {
		t.Errorf("spec.replicas = %d after a restart, want 10 kept (5 claims/s from the status × 2 s)", got)
	}
	if a := g.pool().Status.Autoscaling; a == nil || a.LastClaimTime == nil || !a.LastClaimTime.Time.Equal(testNow.Add(-time.Second).Truncate(time.Second)) {
		t.Errorf("status.autoscaling = %+v, want the last claim time kept", a)
	}
}

func newRigWithDemand(t *testing.T, pool *extv1beta1.SandboxWarmPool) *rig {
	t.Helper()
	g := newRig(t, Options{}, pythonTemplate().Hub(), pool)
	g.r.demand = autoscale.NewDemand(g.clock)
	return g
}

// A status write is a pool event and so another reconcile: while the decision stands, the
// moving figures (rate, last claim) are refreshed at most every reportEvery, or the pool would
// rewrite its status as fast as the API server answers.
func TestAutoscaledPoolRefreshesItsFiguresAtABoundedPace(t *testing.T) {
	g := newRigWithDemand(t, thePool(0).Created(testNow).Autoscaling(0, 1).ScaleToZeroAfter(time.Minute).Hub()) // any claim: 1
	claim := func() { g.r.demand.Record(poolKey) }
	claim()
	g.mustReconcile() // grows to 1: ScaledUp
	g.clock.Step(time.Second)
	claim()
	g.mustReconcile() // stays at 1: Steady
	g.takeWrites()
	steps := []struct {
		name      string
		after     time.Duration
		wantWrite bool
	}{
		{"a claim a second later, same size: no status write", time.Second, false},
		{"another claim a second later: still none", time.Second, false},
		{"a claim once reportEvery has passed: the figures are refreshed", reportEvery, true},
	}
	for _, s := range steps {
		g.clock.Step(s.after)
		claim()
		g.mustReconcile()
		wrote := false
		for _, w := range g.takeWrites() {
			wrote = wrote || w == "status SandboxWarmPool/pool"
		}
		if wrote != s.wantWrite {
			t.Errorf("%s: status written = %t, want %t", s.name, wrote, s.wantWrite)
		}
	}
}
