package controlplane

import (
	"errors"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// A resume answers only with a Ready the controller wrote after it saw the resume: an older one
// is the pod that the pause (still saving its memory, or not reconciled yet) is about to remove.
func TestAResumeWaitsForAReadyWrittenSinceTheResume(t *testing.T) {
	readyAt := func(generation, observed int64) *agentsv1beta1.Sandbox {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
		sb.Status.PodIPs = []string{"10.0.0.7"}
		sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: observed}}
		return sb
	}
	for _, tc := range []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want bool
	}{
		{"ready, written before the pause and the resume were seen", readyAt(3, 1), false},
		{"ready, written before the resume was seen", readyAt(3, 2), false},
		{"ready, written once the resume was seen", readyAt(3, 3), true},
		{"not ready", func() *agentsv1beta1.Sandbox {
			sb := readyAt(3, 3)
			sb.Status.Conditions[0].Status = metav1.ConditionFalse
			return sb
		}(), false},
	} {
		if got := readySinceResumed(tc.sb); got != tc.want {
			t.Errorf("%s: readySinceResumed = %t; want %t", tc.name, got, tc.want)
		}
	}
}

// A fork request's count and timeout: E2B's defaults, and a 400 naming the bounds otherwise.
func TestAForkRequestsCountAndTimeout(t *testing.T) {
	for _, tc := range []struct {
		name        string
		req         forkBody
		wantCount   int32
		wantTimeout int64
		wantErr     string
	}{
		{name: "E2B's defaults", req: forkBody{}, wantCount: 1, wantTimeout: 15},
		{name: "as asked", req: forkBody{Count: ptr.To[int32](3), Timeout: ptr.To[int64](600)}, wantCount: 3, wantTimeout: 600},
		{name: "no forks", req: forkBody{Count: ptr.To[int32](0)}, wantErr: "count must be 1..32, not 0"},
		{name: "more forks than a node should hold", req: forkBody{Count: ptr.To[int32](100)}, wantErr: "count must be 1..32, not 100"},
		{name: "a timeout past a day", req: forkBody{Timeout: ptr.To[int64](86401)}, wantErr: "timeout must be 1..86400 seconds, not 86401"},
	} {
		count, timeout, err := tc.req.values()
		var ae *apiError
		switch {
		case tc.wantErr != "" && (!errors.As(err, &ae) || ae.code != http.StatusBadRequest || ae.msg != tc.wantErr):
			t.Errorf("%s: error %v; want 400 %q", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || count != tc.wantCount || timeout != tc.wantTimeout):
			t.Errorf("%s: %d, %d, %v; want %d, %d", tc.name, count, timeout, err, tc.wantCount, tc.wantTimeout)
		}
	}
}
