package sandboxclaim

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/expectations"
)

func TestCatchUpStatusStartsFromTheLastWrite(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	readyStatus := extv1beta1.SandboxClaimStatus{
		SandboxStatus: extv1beta1.SandboxStatus{Name: "pool-abc", PodIPs: []string{"10.0.0.7"}},
		Conditions: []metav1.Condition{{Type: extv1beta1.ClaimConditionReady, Status: metav1.ConditionTrue,
			Reason: "DependenciesReady", LastTransitionTime: at}},
	}
	claimWith := func(st extv1beta1.SandboxClaimStatus) *extv1beta1.SandboxClaim {
		return &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u1"}, Status: st}
	}
	tests := []struct {
		name        string
		written     *extv1beta1.SandboxClaimStatus // what this process wrote last (nil: nothing)
		wait        time.Duration
		cached      *extv1beta1.SandboxClaim
		wantStatus  extv1beta1.SandboxClaimStatus
		wantPending int // remembered writes left
	}{
		{name: "nothing written: the cached status stands",
			cached: claimWith(extv1beta1.SandboxClaimStatus{}), wantStatus: extv1beta1.SandboxClaimStatus{}},
		{name: "the cache lags the write: start from the write",
			written: &readyStatus, cached: claimWith(extv1beta1.SandboxClaimStatus{}),
			wantStatus: readyStatus, wantPending: 1},
		{name: "the cache shows the write: forget it",
			written: &readyStatus, cached: claimWith(readyStatus), wantStatus: readyStatus},
		{name: "a write the cache never showed is trusted no longer than the TTL",
			written: &readyStatus, wait: expectations.CacheLag + time.Second, cached: claimWith(extv1beta1.SandboxClaimStatus{}),
			wantStatus: extv1beta1.SandboxClaimStatus{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(at.Time)
			r := New(nil, nil, Options{Clock: clk})
			key := client.ObjectKeyFromObject(tt.cached)
			if tt.written != nil {
				r.written.Expect(key, tt.cached.UID, tt.written.DeepCopy())
			}
			clk.Step(tt.wait)
			r.catchUpStatus(tt.cached)
			if !equality.Semantic.DeepEqual(tt.cached.Status, tt.wantStatus) {
				t.Errorf("status after catching up = %+v, want %+v", tt.cached.Status, tt.wantStatus)
			}
			if got := r.written.Pending(key); got != tt.wantPending {
				t.Errorf("remembered writes = %d, want %d", got, tt.wantPending)
			}
		})
	}
}
