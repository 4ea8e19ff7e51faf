package sandboxclaim

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// testNow is the fixed clock of these tests.
var testNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func finished(status metav1.ConditionStatus, at time.Time) metav1.Condition {
	return metav1.Condition{Type: extv1beta1.ClaimConditionFinished, Status: status, Reason: "PodSucceeded", LastTransitionTime: metav1.NewTime(at)}
}

func TestExpiry(t *testing.T) {
	claim := func() *testwrap.ClaimWrapper { return testwrap.MakeClaim("ns", "c").Template("tpl") }
	cases := []struct {
		name      string
		claim     *extv1beta1.SandboxClaim
		wantAt    time.Time // zero: never
		wantDue   bool
		wantByTTL bool
	}{
		{"no lifecycle: never", claim().Hub(), time.Time{}, false, false},
		{"a shutdownTime ahead", claim().ShutdownTime(testNow.Add(time.Hour)).Hub(), testNow.Add(time.Hour), false, false},
		{"a shutdownTime passed", claim().ShutdownTime(testNow.Add(-time.Second)).Hub(), testNow.Add(-time.Second), true, false},
		{"a shutdownTime of exactly testNow is due", claim().ShutdownTime(testNow).Hub(), testNow, true, false},
		{"a TTL before the claim finished: never", claim().TTLAfterFinished(60).Hub(), time.Time{}, false, false},
		{"a TTL counts from when the claim finished", claim().TTLAfterFinished(60).Condition(finished(metav1.ConditionTrue, testNow.Add(-30*time.Second))).Hub(),
			testNow.Add(30 * time.Second), false, true},
		{"a TTL run out", claim().TTLAfterFinished(60).Condition(finished(metav1.ConditionTrue, testNow.Add(-2*time.Minute))).Hub(),
			testNow.Add(-time.Minute), true, true},
		{"a TTL of 0 ends the claim as it finishes", claim().TTLAfterFinished(0).Condition(finished(metav1.ConditionTrue, testNow)).Hub(),
			testNow, true, true},
		{"Finished=False does not start the TTL", claim().TTLAfterFinished(60).Condition(finished(metav1.ConditionFalse, testNow.Add(-time.Hour))).Hub(),
			time.Time{}, false, false},
		{"a finished claim without a TTL waits for its shutdownTime", claim().ShutdownTime(testNow.Add(time.Hour)).Condition(finished(metav1.ConditionTrue, testNow)).Hub(),
			testNow.Add(time.Hour), false, false},
		{"the TTL when it ends first", claim().ShutdownTime(testNow.Add(time.Hour)).TTLAfterFinished(60).Condition(finished(metav1.ConditionTrue, testNow)).Hub(),
			testNow.Add(time.Minute), false, true},
		{"the shutdownTime when it comes first", claim().ShutdownTime(testNow.Add(time.Minute)).TTLAfterFinished(3600).Condition(finished(metav1.ConditionTrue, testNow)).Hub(),
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
	ready := func(status metav1.ConditionStatus, reason string) *extv1beta1.SandboxClaim {
		return testwrap.MakeClaim("ns", "c").Condition(metav1.Condition{Type: extv1beta1.ClaimConditionReady, Status: status, Reason: reason}).Hub()
	}
	cases := []struct {
		name  string
		claim *extv1beta1.SandboxClaim
		want  bool
	}{
		{"no Ready condition", testwrap.MakeClaim("ns", "c").Hub(), false},
		{"Ready", ready(metav1.ConditionTrue, "DependenciesReady"), false},
		{"not Ready for another reason", ready(metav1.ConditionFalse, extv1beta1.ReasonTemplateNotFound), false},
		{"marked expired", ready(metav1.ConditionFalse, extv1beta1.ReasonClaimExpired), true},
	}
	for _, tc := range cases {
		if got := claimExpired(tc.claim); got != tc.want {
			t.Errorf("%s: claimExpired = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestShutdownPolicyDefaultsToRetain(t *testing.T) {
	cases := map[extv1beta1.ShutdownPolicy]extv1beta1.ShutdownPolicy{
		"":                              extv1beta1.ShutdownPolicyRetain,
		extv1beta1.ShutdownPolicyRetain: extv1beta1.ShutdownPolicyRetain,
		extv1beta1.ShutdownPolicyDelete: extv1beta1.ShutdownPolicyDelete,
		extv1beta1.ShutdownPolicyDeleteForeground: extv1beta1.ShutdownPolicyDeleteForeground,
	}
	for in, want := range cases {
		if got := policyOrDefault(in); got != want {
			t.Errorf("policyOrDefault(%q) = %q, want %q", in, got, want)
		}
	}
}

// A claim with an end ahead is looked at again exactly when it is due, not polled.
func TestReconcileRequeuesAtTheClaimsEnd(t *testing.T) {
	// The Sandbox finished 20 s ago; the claim learns it from the Sandbox.
	finishedAt := testNow.Add(-20 * time.Second)
	sbFinished := metav1.Condition{Type: agentsv1beta1.SandboxConditionFinished, Status: metav1.ConditionTrue,
		Reason: agentsv1beta1.ReasonPodSucceeded, LastTransitionTime: metav1.NewTime(finishedAt)}
	cases := []struct {
		name     string
		claim    *extv1beta1.SandboxClaim
		finished bool
		want     time.Duration
	}{
		{"no end: no requeue", claimOf("c").SandboxStatus("c-sb").Hub(), false, 0},
		{"at the shutdownTime", claimOf("c").SandboxStatus("c-sb").ShutdownTime(testNow.Add(90 * time.Minute)).Hub(), false, 90 * time.Minute},
		{"a TTL: none while the Sandbox runs", claimOf("c").SandboxStatus("c-sb").TTLAfterFinished(60).Hub(), false, 0},
		{"a TTL: when it runs out after the Sandbox finished", claimOf("c").SandboxStatus("c-sb").TTLAfterFinished(60).Hub(), true, 40 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := testwrap.MakeSandbox(ns, "c-sb").UID("c-sb-uid").ControlledBy(tc.claim, claimGVK).ReadyWith("10.0.0.3")
			if tc.finished {
				sb.Condition(sbFinished)
			}
			g := newRig(t, pythonTemplate().Hub(), tc.claim, sb.Hub())
			if got := g.mustReconcile("c").RequeueAfter; got != tc.want {
				t.Errorf("requeue after %v, want %v", got, tc.want)
			}
		})
	}
}

// At its end a claim follows its shutdownPolicy: Retain (the default) deletes the Sandbox and
// keeps the claim, marked expired; Delete removes the claim (its Sandbox follows by garbage
// collection); DeleteForeground first shows the expired status, then removes the claim in the
// foreground. A finished claim's TTL always removes the claim.
func TestReconcileEndsTheClaimPerItsShutdownPolicy(t *testing.T) {
	claim := func() *testwrap.ClaimWrapper {
		return claimOf("c").ReadyWith("c-sb", "10.0.0.3")
	}
	shutdownAt := testNow.Add(-time.Second)
	expiredEvent := "Normal ClaimExpired Claim expired at " + shutdownAt.Format(time.RFC3339) + " (shutdownPolicy %s)"
	ttlEnd := testNow.Add(-time.Minute).Add(30 * time.Second)
	cases := []struct {
		name  string
		claim *extv1beta1.SandboxClaim

		wantWrites      []string
		wantClaimKept   bool
		wantSandboxKept bool
		wantEvent       string
	}{
		{name: "Retain by default: the Sandbox goes, the claim stays",
			claim:      claim().ShutdownTime(shutdownAt).Hub(),
			wantWrites: []string{"delete Sandbox/c-sb", "status SandboxClaim/c"}, wantClaimKept: true,
			wantEvent: fmt.Sprintf(expiredEvent, extv1beta1.ShutdownPolicyRetain)},
		{name: "Delete: the claim goes",
			claim:      claim().ShutdownTime(shutdownAt).ShutdownPolicy(extv1alpha1.ShutdownPolicyDelete).Hub(),
			wantWrites: []string{"delete(Background) SandboxClaim/c"}, wantSandboxKept: true,
			wantEvent: fmt.Sprintf(expiredEvent, extv1beta1.ShutdownPolicyDelete)},
		{name: "DeleteForeground: the expired status first, then the claim goes",
			claim:      claim().ShutdownTime(shutdownAt).ShutdownPolicy(extv1alpha1.ShutdownPolicyDeleteForeground).Hub(),
			wantWrites: []string{"status SandboxClaim/c", "delete(Foreground) SandboxClaim/c"}, wantSandboxKept: true,
			wantEvent: fmt.Sprintf(expiredEvent, extv1beta1.ShutdownPolicyDeleteForeground)},
		{name: "a finished claim's TTL removes the claim though its policy retains",
			claim: claim().TTLAfterFinished(30).ShutdownPolicy(extv1alpha1.ShutdownPolicyRetain).
				Condition(finished(metav1.ConditionTrue, testNow.Add(-time.Minute))).Hub(),
			wantWrites: []string{"delete(Background) SandboxClaim/c"}, wantSandboxKept: true,
			wantEvent: "Normal ClaimExpired Claim expired at " + ttlEnd.Format(time.RFC3339) + " (shutdownPolicy Delete)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := testwrap.MakeSandbox(ns, "c-sb").UID("c-sb-uid").ControlledBy(tc.claim, claimGVK).ReadyWith("10.0.0.3").Hub()
			g := newRig(t, pythonTemplate().Hub(), tc.claim, sb)
			if res := g.mustReconcile("c"); res.RequeueAfter != 0 {
				t.Errorf("requeue after %v, want none", res.RequeueAfter)
			}
			if d := cmp.Diff(tc.wantWrites, g.takeWrites()); d != "" {
				t.Errorf("API writes (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]string{tc.wantEvent}, g.emitted()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if kept := g.sandbox("c-sb") != nil; kept != tc.wantSandboxKept {
				t.Errorf("Sandbox kept = %v, want %v", kept, tc.wantSandboxKept)
			}
			got := g.claim("c")
			if (got != nil) != tc.wantClaimKept {
				t.Fatalf("claim kept = %v, want %v", got != nil, tc.wantClaimKept)
			}
			if got == nil {
				return
			}
			if ready := readyOf(t, got); ready.Status != metav1.ConditionFalse || ready.Reason != extv1beta1.ReasonClaimExpired {
				t.Errorf("Ready %s/%s, want False/%s", ready.Status, ready.Reason, extv1beta1.ReasonClaimExpired)
			}
			if got.Status.SandboxStatus.PodIPs != nil || got.Status.SandboxStatus.Name != "c-sb" {
				t.Errorf("status.sandbox %+v, want the name kept and no podIPs", got.Status.SandboxStatus)
			}
			g.mustReconcile("c")
			if w, ev := g.takeWrites(), g.emitted(); len(w) != 0 || len(ev) != 0 {
				t.Errorf("reconciling the expired claim again wrote %q and said %q, want neither", w, ev)
			}
		})
	}
}

// The clock reaching the shutdownTime is what ends a claim that was served until then.
func TestTheClaimEndsWhenTheClockReachesItsShutdownTime(t *testing.T) {
	claim := claimOf("c").ReadyWith("c-sb", "10.0.0.3").ShutdownTime(testNow.Add(time.Hour)).Hub()
	sb := testwrap.MakeSandbox(ns, "c-sb").UID("c-sb-uid").ControlledBy(claim, claimGVK).ReadyWith("10.0.0.3").Hub()
	g := newRig(t, pythonTemplate().Hub(), claim, sb)
	wait := g.mustReconcile("c").RequeueAfter
	if g.sandbox("c-sb") == nil {
		t.Fatal("the Sandbox was deleted an hour before the claim's shutdownTime")
	}
	g.clock.Step(wait)
	g.mustReconcile("c")
	if g.sandbox("c-sb") != nil {
		t.Errorf("the Sandbox is still there at the shutdownTime (requeued after %v)", wait)
	}
}

// Deleting the expired claim's Sandbox can fail: the reconcile is retried, and the claim
// already shows it expired.
func TestReconcileRetriesAFailedDeleteOfTheExpiredSandbox(t *testing.T) {
	claim := claimOf("c").ReadyWith("c-sb", "10.0.0.3").ShutdownTime(testNow.Add(-time.Second)).Hub()
	sb := testwrap.MakeSandbox(ns, "c-sb").UID("c-sb-uid").ControlledBy(claim, claimGVK).ReadyWith("10.0.0.3").Hub()
	g := newRig(t, pythonTemplate().Hub(), claim, sb)
	g.failWrites("delete", "Sandbox", apierrors.NewInternalError(errors.New("etcd timeout")))
	if _, err := g.reconcile("c"); !apierrors.IsInternalError(err) {
		t.Fatalf("Reconcile error %v, want the delete's error", err)
	}
	if ready := readyOf(t, g.claim("c")); ready.Reason != extv1beta1.ReasonClaimExpired {
		t.Errorf("Ready reason %s, want %s while the delete is retried", ready.Reason, extv1beta1.ReasonClaimExpired)
	}
	g.failWrites("delete", "Sandbox", nil)
	g.mustReconcile("c")
	if g.sandbox("c-sb") != nil {
		t.Error("the retry left the expired claim's Sandbox in place")
	}
}
