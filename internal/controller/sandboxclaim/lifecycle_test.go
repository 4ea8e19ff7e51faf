package sandboxclaim

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// testNow is the fixed clock of these tests.
var testNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func finished(status metav1.ConditionStatus, at time.Time) metav1.Condition {
	return metav1.Condition{Type: extv1alpha1.ClaimConditionFinished, Status: status, Reason: "PodSucceeded", LastTransitionTime: metav1.NewTime(at)}
}

func TestExpiry(t *testing.T) {
	claim := func() *testwrap.ClaimWrapper { return testwrap.MakeClaim("ns", "c").Template("tpl") }
	cases := []struct {
		name      string
		claim     *extv1alpha1.SandboxClaim
		wantAt    time.Time // zero: never
		wantDue   bool
		wantByTTL bool
	}{
		{"no lifecycle: never", claim().Obj(), time.Time{}, false, false},
		{"a shutdownTime ahead", claim().ShutdownTime(testNow.Add(time.Hour)).Obj(), testNow.Add(time.Hour), false, false},
		{"a shutdownTime passed", claim().ShutdownTime(testNow.Add(-time.Second)).Obj(), testNow.Add(-time.Second), true, false},
		{"a shutdownTime of exactly testNow is due", claim().ShutdownTime(testNow).Obj(), testNow, true, false},
		{"a TTL before the claim finished: never", claim().TTLAfterFinished(60).Obj(), time.Time{}, false, false},
		{"a TTL counts from when the claim finished", claim().TTLAfterFinished(60).Condition(finished(metav1.ConditionTrue, testNow.Add(-30*time.Second))).Obj(),
			testNow.Add(30 * time.Second), false, true},
		{"a TTL run out", claim().TTLAfterFinished(60).Condition(finished(metav1.ConditionTrue, testNow.Add(-2*time.Minute))).Obj(),
			testNow.Add(-time.Minute), true, true},
		{"a TTL of 0 ends the claim as it finishes", claim().TTLAfterFinished(0).Condition(finished(metav1.ConditionTrue, testNow)).Obj(),
			testNow, true, true},
		{"Finished=False does not start the TTL", claim().TTLAfterFinished(60).Condition(finished(metav1.ConditionFalse, testNow.Add(-time.Hour))).Obj(),
			time.Time{}, false, false},
		{"a finished claim without a TTL waits for its shutdownTime", claim().ShutdownTime(testNow.Add(time.Hour)).Condition(finished(metav1.ConditionTrue, testNow)).Obj(),
			testNow.Add(time.Hour), false, false},
		{"the TTL when it ends first", claim().ShutdownTime(testNow.Add(time.Hour)).TTLAfterFinished(60).Condition(finished(metav1.ConditionTrue, testNow)).Obj(),
			testNow.Add(time.Minute), false, true},
		{"the shutdownTime when it comes first", claim().ShutdownTime(testNow.Add(time.Minute)).TTLAfterFinished(3600).Condition(finished(metav1.ConditionTrue, testNow)).Obj(),
			testNow.Add(time.Minute), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at, due := expiry(tc.claim, testNow)
			if !at.Equal(tc.wantAt) || due != tc.wantDue {
				t.Errorf("expiry = %s due %v, want %s due %v", at, due, tc.wantAt, tc.wantDue)
			}
			if _, byTTL := endOf(tc.claim); byTTL != tc.wantByTTL {
				t.Errorf("ends by the finished-TTL = %v, want %v", byTTL, tc.wantByTTL)
			}
		})
	}
}

func TestClaimExpired(t *testing.T) {
	ready := func(status metav1.ConditionStatus, reason string) *extv1alpha1.SandboxClaim {
		return testwrap.MakeClaim("ns", "c").Condition(metav1.Condition{Type: extv1alpha1.ClaimConditionReady, Status: status, Reason: reason}).Obj()
	}
	cases := []struct {
		name  string
		claim *extv1alpha1.SandboxClaim
		want  bool
	}{
		{"no Ready condition", testwrap.MakeClaim("ns", "c").Obj(), false},
		{"Ready", ready(metav1.ConditionTrue, "DependenciesReady"), false},
		{"not Ready for another reason", ready(metav1.ConditionFalse, extv1alpha1.ReasonTemplateNotFound), false},
		{"marked expired", ready(metav1.ConditionFalse, extv1alpha1.ReasonClaimExpired), true},
	}
	for _, tc := range cases {
		if got := claimExpired(tc.claim); got != tc.want {
			t.Errorf("%s: claimExpired = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestShutdownPolicyDefaultsToRetain(t *testing.T) {
	cases := map[extv1alpha1.ShutdownPolicy]extv1alpha1.ShutdownPolicy{
		"":                               extv1alpha1.ShutdownPolicyRetain,
		extv1alpha1.ShutdownPolicyRetain: extv1alpha1.ShutdownPolicyRetain,
		extv1alpha1.ShutdownPolicyDelete: extv1alpha1.ShutdownPolicyDelete,
		extv1alpha1.ShutdownPolicyDeleteForeground: extv1alpha1.ShutdownPolicyDeleteForeground,
	}
	for in, want := range cases {
		if got := policyOrDefault(in); got != want {
			t.Errorf("policyOrDefault(%q) = %q, want %q", in, got, want)
		}
	}
}
