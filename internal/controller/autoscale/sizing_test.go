package autoscale

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// policy: 0–100 members, 10 s of headroom, a 60 s window, 5 min stabilization, idle after 10 min.
var policy = Policy{Min: 0, Max: 100, Headroom: 10 * time.Second, Window: time.Minute,
	Stabilization: 5 * time.Minute, IdleAfter: 10 * time.Minute}

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestDecide(t *testing.T) {
	withMin := policy
	withMin.Min = 3
	lowMax := policy
	lowMax.Max = 8
	noStabilization := policy
	noStabilization.Stabilization = 0
	cases := []struct {
		name        string
		in          Input
		wantReplica int32
		wantReason  string
	}{
		{"a rising rate grows the pool at once to ceil(rate × headroom)",
			Input{Policy: policy, Now: at(0), Rate: 2.05, LastActivity: at(0), Current: 5},
			21, extv1beta1.AutoscaleReasonScaledUp},
		{"any claim in the window asks for at least one member",
			Input{Policy: policy, Now: at(0), Rate: 0.01, LastActivity: at(0), Current: 0},
			1, extv1beta1.AutoscaleReasonScaledUp},
		{"growth stops at maxReplicas",
			Input{Policy: lowMax, Now: at(0), Rate: 50, LastActivity: at(0), Current: 2},
			8, extv1beta1.AutoscaleReasonScaledUp},
		{"a lowered maxReplicas shrinks the pool at once, stabilization or not",
			Input{Policy: lowMax, Now: at(0), Rate: 50, LastActivity: at(0), Current: 20,
				History: []Recommendation{{At: at(-time.Second), Replicas: 20}}},
			8, extv1beta1.AutoscaleReasonScaledDown},
		{"minReplicas holds the pool up when claims are rare",
			Input{Policy: withMin, Now: at(0), Rate: 0.05, LastActivity: at(0), Current: 3},
			3, extv1beta1.AutoscaleReasonSteady},
		{"a falling rate is held off while a higher size was wanted within the stabilization",
			Input{Policy: policy, Now: at(4 * time.Minute), Rate: 1, LastActivity: at(4 * time.Minute), Current: 50,
				History: []Recommendation{{At: at(0), Replicas: 50}, {At: at(time.Minute), Replicas: 30}}},
			50, extv1beta1.AutoscaleReasonStabilizing},
		{"once the high recommendations leave the stabilization window the pool shrinks to the highest left",
			Input{Policy: policy, Now: at(5*time.Minute + 30*time.Second), Rate: 1, LastActivity: at(5 * time.Minute), Current: 50,
				History: []Recommendation{{At: at(0), Replicas: 50}, {At: at(time.Minute), Replicas: 30}}},
			30, extv1beta1.AutoscaleReasonScaledDown},
		{"without stabilization a falling rate shrinks the pool at once",
			Input{Policy: noStabilization, Now: at(0), Rate: 1, LastActivity: at(0), Current: 50,
				History: []Recommendation{{At: at(-time.Second), Replicas: 50}}},
			10, extv1beta1.AutoscaleReasonScaledDown},
		{"after a restart (no history) the current size counts as wanted now: no early shrink",
			Input{Policy: policy, Now: at(0), Rate: 0.5, LastActivity: at(0), Current: 40},
			40, extv1beta1.AutoscaleReasonStabilizing},
		{"no claim for scaleToZeroAfter drops the pool to minReplicas, without stabilization",
			Input{Policy: policy, Now: at(10 * time.Minute), Rate: 0, LastActivity: at(0), Current: 40,
				History: []Recommendation{{At: at(9 * time.Minute), Replicas: 40}}},
			0, extv1beta1.AutoscaleReasonIdle},
		{"idle goes to minReplicas, not below",
			Input{Policy: withMin, Now: at(time.Hour), Rate: 0, LastActivity: at(0), Current: 40},
			3, extv1beta1.AutoscaleReasonIdle},
		{"one second short of scaleToZeroAfter the pool is kept",
			Input{Policy: policy, Now: at(10*time.Minute - time.Second), Rate: 0, LastActivity: at(0), Current: 40,
				History: []Recommendation{{At: at(9 * time.Minute), Replicas: 40}}},
			40, extv1beta1.AutoscaleReasonStabilizing},
		{"a steady rate keeps the size",
			Input{Policy: policy, Now: at(0), Rate: 2, LastActivity: at(0), Current: 20,
				History: []Recommendation{{At: at(-time.Minute), Replicas: 20}}},
			20, extv1beta1.AutoscaleReasonSteady},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.in)
			if d.Replicas != tc.wantReplica || d.Reason != tc.wantReason {
				t.Errorf("Decide = %d (%s: %s), want %d (%s)", d.Replicas, d.Reason, d.Message, tc.wantReplica, tc.wantReason)
			}
			if d.RequeueAfter <= 0 || d.RequeueAfter > 10*time.Second {
				t.Errorf("RequeueAfter = %s, want within (0, 10s]: the pool re-evaluates on its own timer", d.RequeueAfter)
			}
		})
	}
}

func TestDecideRequeuesWhenThePoolTurnsIdle(t *testing.T) {
	p := policy
	p.IdleAfter = 3 * time.Second
	d := Decide(Input{Policy: p, Now: at(time.Second), Rate: 1, LastActivity: at(0), Current: 10})
	if d.RequeueAfter != 2*time.Second {
		t.Errorf("RequeueAfter = %s, want 2s: the moment the pool has had no claim for scaleToZeroAfter", d.RequeueAfter)
	}
}

func TestDecideKeepsOnlyTheStabilizationWindowOfHistory(t *testing.T) {
	history := []Recommendation{{At: at(0), Replicas: 9}, {At: at(4 * time.Minute), Replicas: 7}}
	d := Decide(Input{Policy: policy, Now: at(6 * time.Minute), Rate: 0.5, LastActivity: at(6 * time.Minute), Current: 9, History: history})
	want := []Recommendation{{At: at(4 * time.Minute), Replicas: 7}, {At: at(6 * time.Minute), Replicas: 5}}
	if len(d.History) != len(want) {
		t.Fatalf("History = %v, want %v", d.History, want)
	}
	for i := range want {
		if !d.History[i].At.Equal(want[i].At) || d.History[i].Replicas != want[i].Replicas {
			t.Errorf("History = %v, want %v", d.History, want)
		}
	}
	if d.Replicas != 7 {
		t.Errorf("Replicas = %d, want 7 (the highest recommendation left in the window)", d.Replicas)
	}
}

func TestPolicyOf(t *testing.T) {
	cases := []struct {
		name string
		in   extv1beta1.SandboxWarmPoolAutoscaling
		want Policy
	}{
		{"only maxReplicas: every default", extv1beta1.SandboxWarmPoolAutoscaling{MaxReplicas: 7},
			Policy{Min: 0, Max: 7, Headroom: 10 * time.Second, Window: time.Minute, Stabilization: 5 * time.Minute, IdleAfter: 10 * time.Minute}},
		{"every field set", extv1beta1.SandboxWarmPoolAutoscaling{MinReplicas: new(int32(2)), MaxReplicas: 9, HeadroomSeconds: new(int32(3)),
			Window: &metav1.Duration{Duration: 5 * time.Second}, ScaleDownStabilization: &metav1.Duration{},
			ScaleToZeroAfter: &metav1.Duration{Duration: 2 * time.Second}},
			Policy{Min: 2, Max: 9, Headroom: 3 * time.Second, Window: 5 * time.Second, Stabilization: 0, IdleAfter: 2 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PolicyOf(&tc.in); got != tc.want {
				t.Errorf("PolicyOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}
