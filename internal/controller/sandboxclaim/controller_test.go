package sandboxclaim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

var claimGVK = extv1beta1.GroupVersion.WithKind("SandboxClaim")

func readyOf(t *testing.T, claim *extv1beta1.SandboxClaim) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(claim.Status.Conditions, extv1beta1.ClaimConditionReady)
	if c == nil {
		t.Fatalf("claim %s has no Ready condition; conditions %+v", claim.Name, claim.Status.Conditions)
	}
	return *c
}

func TestColdStartBuildsTheClaimsOwnSandbox(t *testing.T) {
	claim := claimOf("c").WarmPool("none").Label("team", "a").Annotation("note", "x").
		Label("agents.x-k8s.io/reserved", "forged").Hub()
	g := newRig(t, pythonTemplate().Image("python:3.13").Hub(), claim)
	if res := g.mustReconcile("c"); res.RequeueAfter != 0 {
		t.Errorf("requeue after %v, want none", res.RequeueAfter)
	}
	assertServedBy(t, g, "c", "c", extv1beta1.LaunchTypeCold)
	sb := g.sandbox("c")
	if sb.Labels["team"] != "a" || sb.Annotations["note"] != "x" {
		t.Errorf("Sandbox labels %v annotations %v, want the claim's own team=a and note=x copied", sb.Labels, sb.Annotations)
	}
	if v, ok := sb.Labels["agents.x-k8s.io/reserved"]; ok {
		t.Errorf("the claim's reserved label reached the Sandbox (%q); only the controllers set those", v)
	}
	if got := sb.Annotations[extv1beta1.TemplateRefAnnotation]; got != "python" {
		t.Errorf("template annotation %q, want python", got)
	}
	if got := sb.Spec.PodTemplate.Spec.Containers[0].Image; got != "python:3.13" {
		t.Errorf("pod image %q, want the template's python:3.13", got)
	}
	got := g.claim("c")
	if ready := readyOf(t, got); ready.Status != metav1.ConditionFalse || ready.Reason != extv1beta1.ReasonSandboxNotReady {
		t.Errorf("Ready %+v, want False/%s until the Sandbox controller reports", ready, extv1beta1.ReasonSandboxNotReady)
	}
	if got.Status.SandboxStatus.PodIPs != nil {
		t.Errorf("podIPs %v, want none before the Sandbox is Ready", got.Status.SandboxStatus.PodIPs)
	}
	want := []string{`Normal SandboxProvisioned Created Sandbox "c" from template "python" (cold: the claim's warmpool is none)`}
	if d := cmp.Diff(want, g.emitted()); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}

// A claim that cannot get a Sandbox says why on its Ready condition. Bad input is not retried
// (the claim's next change or its template's brings it back); an API error is.
func TestClaimReportsWhyItHasNoSandbox(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	foreign := testwrap.MakeSandbox(ns, "c").UID("foreign-uid").Hub()
	boom := apierrors.NewInternalError(errors.New("etcd timeout"))
	cases := []struct {
		name      string
		objs      []client.Object
		faultVerb string
		faultKind string

		wantErr       bool
		wantReason    string
		wantMessage   string
		wantSandboxes []string
	}{
		{name: "the template is missing", objs: []client.Object{claimOf("c").Hub()},
			wantReason: extv1beta1.ReasonTemplateNotFound, wantMessage: `SandboxTemplate "python" not found`},
		{name: "env the template does not allow", objs: []client.Object{tmpl, claimOf("c").Env("A", "1").Hub()},
			wantReason: extv1beta1.ReasonEnvVarsInjectionRejected, wantMessage: "envVarsInjectionPolicy is Disallowed"},
		{name: "a Sandbox of the claim's name that is someone else's", objs: []client.Object{tmpl, claimOf("c").Hub(), foreign},
			wantReason: extv1beta1.ReasonSandboxNotOwned, wantMessage: `a Sandbox named "c" exists and is not owned by this claim`,
			wantSandboxes: []string{"c"}},
		{name: "creating the Sandbox fails", objs: []client.Object{tmpl, claimOf("c").Hub()}, faultVerb: "create", faultKind: "Sandbox",
			wantErr: true, wantReason: agentsv1beta1.ReasonReconcilerError, wantMessage: "etcd timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, tc.objs...)
			if tc.faultVerb != "" {
				g.failWrites(tc.faultVerb, tc.faultKind, boom)
			}
			res, err := g.reconcile("c")
			if (err != nil) != tc.wantErr || res.RequeueAfter != 0 {
				t.Fatalf("Reconcile = %+v, %v; want an error %v and no timed requeue", res, err, tc.wantErr)
			}
			if ready := readyOf(t, g.claim("c")); ready.Status != metav1.ConditionFalse || ready.Reason != tc.wantReason || !strings.Contains(ready.Message, tc.wantMessage) {
				t.Errorf("Ready %s/%s %q, want False/%s containing %q", ready.Status, ready.Reason, ready.Message, tc.wantReason, tc.wantMessage)
			}
			if d := cmp.Diff(tc.wantSandboxes, g.sandboxNames()); d != "" {
				t.Errorf("Sandboxes (-want +got):\n%s", d)
			}
			if sb := g.sandbox("c"); sb != nil && metav1.GetControllerOf(sb) != nil {
				t.Errorf("someone else's Sandbox c was taken over: controller %v", metav1.GetControllerOf(sb))
			}
		})
	}
}

// A failed status write fails the reconcile, and the events wait for the status they describe.
func TestStatusWriteErrorIsRetried(t *testing.T) {
	g := newRig(t, pythonTemplate().Hub(), claimOf("c").Hub())
	g.failWrites("status", "SandboxClaim", apierrors.NewInternalError(errors.New("etcd timeout")))
	if _, err := g.reconcile("c"); !apierrors.IsInternalError(err) {
		t.Fatalf("Reconcile error %v, want the status write's error", err)
	}
	if ev := g.emitted(); len(ev) != 0 {
		t.Errorf("events %q before the status they describe was written", ev)
	}
	g.failWrites("status", "SandboxClaim", nil)
	g.mustReconcile("c")
	assertServedBy(t, g, "c", "c", extv1beta1.LaunchTypeCold)
	if d := cmp.Diff([]string{"create Sandbox/c", "status SandboxClaim/c", "status SandboxClaim/c"}, g.takeWrites()); d != "" {
		t.Errorf("API writes (-want +got), the retry creates nothing new:\n%s", d)
	}
}

// servedCase is claim "c" served warm, by member m1 of pool "pool" (whose m2 stays warm), or
// cold, by a Sandbox it creates.
type servedCase struct {
	name        string
	claim       *extv1beta1.SandboxClaim
	wantSandbox string
	wantLaunch  string
}

func servedWarmOrCold() []servedCase {
	return []servedCase{
		{"warm: the member it adopted", claimOf("c").Hub(), "m1", extv1beta1.LaunchTypeWarm},
		{"cold: the Sandbox it created", claimOf("c").WarmPool("none").Hub(), "c", extv1beta1.LaunchTypeCold},
	}
}

// newServedRig holds the python template, pool "pool" with its warm members m1 and m2 in the
// warm queue, and claim.
func newServedRig(t *testing.T, claim *extv1beta1.SandboxClaim) *rig {
	t.Helper()
	tmpl := pythonTemplate().Hub()
	pool := warmPool("pool")
	m1, m2 := warmMember(pool, tmpl, "m1", "10.0.0.1").Hub(), warmMember(pool, tmpl, "m2", "10.0.0.2").Hub()
	g := newRig(t, tmpl, pool, m1, m2, claim)
	g.offer(g.r, m1, m2)
	return g
}

// A reconcile running on a cache that does not show its own last writes yet neither gives the
// claim a second Sandbox nor writes the same status again.
func TestReconcileOnALaggingCache(t *testing.T) {
	for _, tc := range servedWarmOrCold() {
		t.Run(tc.name, func(t *testing.T) {
			g := newServedRig(t, tc.claim)
			g.freezeCache()
			g.mustReconcile("c")
			g.takeWrites()
			g.emitted()

			g.mustReconcile("c") // the cache still shows the claim unserved
			if w := g.takeWrites(); len(w) != 0 {
				t.Errorf("a reconcile on the stale cache wrote %q, want nothing", w)
			}
			assertServedBy(t, g, "c", tc.wantSandbox, tc.wantLaunch)
			assertPoolStillOwns(t, g, "m2")

			g.thawCache()
			g.mustReconcile("c")
			if w := g.takeWrites(); len(w) != 0 {
				t.Errorf("once the cache caught up, the reconcile wrote %q, want nothing", w)
			}
		})
	}
}

// The claim's status write can fail after its Sandbox was taken: the retry, on a cache that
// shows neither the adoption nor a status, still finds the Sandbox the claim was given.
func TestRetryAfterAFailedStatusWriteKeepsTheSandbox(t *testing.T) {
	for _, tc := range servedWarmOrCold() {
		t.Run(tc.name, func(t *testing.T) {
			g := newServedRig(t, tc.claim)
			g.freezeCache()
			g.failWrites("status", "SandboxClaim", apierrors.NewInternalError(errors.New("etcd timeout")))
			if _, err := g.reconcile("c"); err == nil {
				t.Fatal("Reconcile succeeded, want the status write's error")
			}
			g.failWrites("status", "SandboxClaim", nil)
			g.mustReconcile("c")
			assertServedBy(t, g, "c", tc.wantSandbox, tc.wantLaunch)
			assertPoolStillOwns(t, g, "m2")
		})
	}
}

// A restarted controller has no memory of its writes: a cold create that already happened is
// recognised by the Sandbox's name and owner, not made again.
func TestColdCreateThatAlreadyHappenedIsTakenOver(t *testing.T) {
	claim := claimOf("c").WarmPool("none").Hub()
	g := newRig(t, pythonTemplate().Hub(), claim)
	g.freezeCache()
	mine := testwrap.MakeSandbox(ns, "c").UID("c-sb-uid").ControlledBy(claim, claimGVK).
		Label(extv1beta1.ClaimUIDLabel, string(claim.UID)).Label(extv1beta1.LaunchTypeLabel, extv1beta1.LaunchTypeCold).
		ReadyWith("10.0.0.3").Hub()
	if err := g.api.Create(context.Background(), mine); err != nil {
		t.Fatal(err)
	}
	g.mustReconcile("c")
	assertServedBy(t, g, "c", "c", extv1beta1.LaunchTypeCold)
	if got := g.claim("c").Status.SandboxStatus.PodIPs; !cmp.Equal(got, []string{"10.0.0.3"}) {
		t.Errorf("podIPs %v, want the existing Sandbox's", got)
	}
	if ev := g.emitted(); len(ev) != 0 {
		t.Errorf("events %q, want none: nothing was provisioned", ev)
	}
}

// The claim's status names a Sandbox the cache does not show as the claim's: the API server
// decides. A Sandbox deleted under the claim is reported, never silently replaced.
func TestStatusNamesASandboxTheCacheDoesNotShow(t *testing.T) {
	claim := claimOf("c").ReadyWith("c-sb", "10.0.0.3").Hub()
	mine := testwrap.MakeSandbox(ns, "c-sb").UID("c-sb-uid").ControlledBy(claim, claimGVK).ReadyWith("10.0.0.3")
	cases := []struct {
		name       string
		inAPI      *agentsv1beta1.Sandbox // created after the cache froze; nil: none
		deleting   bool                   // and then deleted (a finalizer holds it)
		wantReady  metav1.ConditionStatus
		wantReason string
		wantIPs    []string
	}{
		{"the API server has it: it still serves the claim", mine.Hub(), false, metav1.ConditionTrue, agentsv1beta1.ReasonReady, []string{"10.0.0.3"}},
		{"deleted: the claim says so", nil, false, metav1.ConditionFalse, extv1beta1.ReasonSandboxMissing, nil},
		{"being deleted: the claim says so", mine.Clone().Finalizers("test/hold").Hub(), true,
			metav1.ConditionFalse, extv1beta1.ReasonSandboxMissing, nil},
		{"now someone else's: the claim says so", testwrap.MakeSandbox(ns, "c-sb").UID("other-uid").ReadyWith("10.0.0.3").Hub(), false,
			metav1.ConditionFalse, extv1beta1.ReasonSandboxMissing, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, pythonTemplate().Hub(), claim)
			g.freezeCache()
			if tc.inAPI != nil {
				if err := g.api.Create(context.Background(), tc.inAPI); err != nil {
					t.Fatal(err)
				}
			}
			if tc.deleting {
				if err := g.api.Delete(context.Background(), tc.inAPI); err != nil {
					t.Fatal(err)
				}
			}
			g.mustReconcile("c")
			got := g.claim("c")
			if ready := readyOf(t, got); ready.Status != tc.wantReady || ready.Reason != tc.wantReason {
				t.Errorf("Ready %s/%s %q, want %s/%s", ready.Status, ready.Reason, ready.Message, tc.wantReady, tc.wantReason)
			}
			if got.Status.SandboxStatus.Name != "c-sb" || !cmp.Equal(got.Status.SandboxStatus.PodIPs, tc.wantIPs) {
				t.Errorf("status.sandbox %+v, want name c-sb (the record of which it was) and podIPs %v", got.Status.SandboxStatus, tc.wantIPs)
			}
			for _, w := range g.takeWrites() {
				if strings.HasPrefix(w, "create") || strings.HasPrefix(w, "patch Sandbox") {
					t.Errorf("wrote %q: the claim never takes another Sandbox in place of its own", w)
				}
			}
		})
	}
}

// The claim mirrors its Sandbox: Ready (with podIPs only once Ready) and Finished.
func TestClaimMirrorsItsSandbox(t *testing.T) {
	claim := claimOf("c").SandboxStatus("c-sb").Hub()
	sb := func() *testwrap.SandboxWrapper {
		return testwrap.MakeSandbox(ns, "c-sb").UID("c-sb-uid").ControlledBy(claim, claimGVK)
	}
	finishedAt := testNow.Add(-time.Minute).Truncate(time.Second)
	cases := []struct {
		name         string
		sandbox      *agentsv1beta1.Sandbox
		wantReady    metav1.Condition
		wantIPs      []string
		wantFinished *metav1.Condition
		wantEvents   []string
	}{
		{name: "no report yet",
			sandbox:   sb().Hub(),
			wantReady: metav1.Condition{Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonSandboxNotReady, Message: "Waiting for the Sandbox controller to report on c-sb"}},
		{name: "ready: podIPs appear",
			sandbox:   sb().ReadyWith("10.0.0.3").Hub(),
			wantReady: metav1.Condition{Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonReady}, wantIPs: []string{"10.0.0.3"}},
		{name: "not ready: its reason, and no podIPs though the pod has one",
			sandbox: sb().PodIPs("10.0.0.3").Condition(metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse,
				Reason: agentsv1beta1.ReasonPodNotReady, Message: "container runtime not ready"}).Hub(),
			wantReady: metav1.Condition{Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonPodNotReady, Message: "container runtime not ready"}},
		{name: "finished: the time it finished is kept, so ttlSecondsAfterFinished counts from it",
			sandbox: sb().Condition(metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonPodSucceeded}).
				Condition(metav1.Condition{Type: agentsv1beta1.SandboxConditionFinished, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonPodSucceeded,
					LastTransitionTime: metav1.NewTime(finishedAt)}).Hub(),
			wantReady: metav1.Condition{Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonPodSucceeded},
			wantFinished: &metav1.Condition{Type: extv1beta1.ClaimConditionFinished, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonPodSucceeded,
				LastTransitionTime: metav1.NewTime(finishedAt)}},
		{name: "expired and retained: said once, on the claim",
			sandbox: sb().Condition(metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonExpired,
				Message: "shutdownTime passed"}).Hub(),
			wantReady:  metav1.Condition{Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonExpired, Message: "shutdownTime passed"},
			wantEvents: []string{`Normal SandboxExpired Sandbox "c-sb" expired and was retained; this claim stays until it is deleted`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, pythonTemplate().Hub(), claim, tc.sandbox)
			g.mustReconcile("c")
			got := g.claim("c")
			ready := readyOf(t, got)
			if ready.Status != tc.wantReady.Status || ready.Reason != tc.wantReady.Reason || ready.Message != tc.wantReady.Message {
				t.Errorf("Ready %s/%s %q, want %s/%s %q", ready.Status, ready.Reason, ready.Message, tc.wantReady.Status, tc.wantReady.Reason, tc.wantReady.Message)
			}
			if !cmp.Equal(got.Status.SandboxStatus.PodIPs, tc.wantIPs) {
				t.Errorf("podIPs %v, want %v", got.Status.SandboxStatus.PodIPs, tc.wantIPs)
			}
			finished := meta.FindStatusCondition(got.Status.Conditions, extv1beta1.ClaimConditionFinished)
			if finished != nil {
				finished.ObservedGeneration = 0
			}
			if d := cmp.Diff(tc.wantFinished, finished); d != "" {
				t.Errorf("Finished condition (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantEvents, g.emitted()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}

			g.takeWrites()
			g.mustReconcile("c")
			if w, ev := g.takeWrites(), g.emitted(); len(w) != 0 || len(ev) != 0 {
				t.Errorf("reconciling again without a change wrote %q and said %q, want neither", w, ev)
			}
		})
	}
}

func TestReconcileLeavesGoneAndDeletingClaimsAlone(t *testing.T) {
	cases := []struct {
		name string
		objs []client.Object
	}{
		{"the claim is gone", nil},
		{"the claim is being deleted", []client.Object{claimOf("c").Finalizers("test/hold").Deleting(testNow).Hub()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, append(tc.objs, pythonTemplate().Hub())...)
			if res := g.mustReconcile("c"); res.RequeueAfter != 0 {
				t.Errorf("requeue after %v, want none", res.RequeueAfter)
			}
			if w := g.takeWrites(); len(w) != 0 {
				t.Errorf("writes %q, want none", w)
			}
		})
	}
}

// A Sandbox deleted before the cache showed it adopted or created for the claim: its delete
// event drops the binding this process remembered, so the claim reports the Sandbox missing at
// once instead of trusting its own write until the cache lag passes (with nothing to wake it then).
func TestASandboxDeletedBeforeTheCacheShowedTheBindingIsReportedMissing(t *testing.T) {
	for _, tc := range servedWarmOrCold() {
		t.Run(tc.name, func(t *testing.T) {
			g := newServedRig(t, tc.claim)
			g.freezeCache()
			g.mustReconcile("c")
			served := g.sandbox(tc.wantSandbox)
			if err := g.api.Delete(context.Background(), served); err != nil {
				t.Fatal(err)
			}
			g.r.forgetDeletedBinding(served)
			g.thawCache()
			g.mustReconcile("c")
			if ready := readyOf(t, g.claim("c")); ready.Reason != extv1beta1.ReasonSandboxMissing {
				t.Errorf("Ready %s/%s %q, want False/%s: the claim's Sandbox is gone", ready.Status, ready.Reason, ready.Message, extv1beta1.ReasonSandboxMissing)
			}
		})
	}
}
