package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandbox"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// fakeActivity answers what a sandboxd would, per Sandbox name.
type fakeActivity struct {
	mu  sync.Mutex
	act map[string]wire.Activity
}

func (f *fakeActivity) Activity(_ context.Context, _, name string) (wire.Activity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.act[name]
	if !ok {
		return wire.Activity{}, fmt.Errorf("no sandboxd answers for %s", name)
	}
	return a, nil
}

func idleFor(d time.Duration) wire.Activity {
	return wire.Activity{IdleSeconds: d.Seconds(), LastActivity: time.Now().Add(-d)}
}

// The idle pause, reconcile by reconcile against the real API server, with sandboxd's answers
// made up: a Sandbox idle for its timeout is paused as replicas: 0 pauses it and says why; one
// that is busy or not idle long enough is not, and is looked at again in time; a bad value is
// reported and pauses nothing; a resumed Sandbox drops the idle mark.
func TestIdlePauseFollowsTheActivitySandboxdReports(t *testing.T) {
	cases := []struct {
		name        string
		timeout     string
		activity    wire.Activity
		wantPaused  bool
		wantRequeue time.Duration // 0: not checked
		wantIdle    metav1.ConditionStatus
		wantReason  string // of the IdlePause condition
	}{
		{"idle past its timeout: paused", "5m", idleFor(301 * time.Second), true, 0, metav1.ConditionTrue, agentsv1alpha1.ReasonIdleWatched},
		{"a command running: kept, looked at again within a quarter of the timeout", "5m",
			wire.Activity{Active: true, RunningProcesses: 1}, false, 30 * time.Second, metav1.ConditionTrue, agentsv1alpha1.ReasonIdleWatched},
		{"idle, not long enough: looked at again when it could be due", "20s", idleFor(15 * time.Second), false, 5 * time.Second,
			metav1.ConditionTrue, agentsv1alpha1.ReasonIdleWatched},
		{"not a duration: reported, never paused", "soon", idleFor(24 * time.Hour), false, 0, metav1.ConditionFalse, agentsv1alpha1.ReasonInvalidIdleTimeout},
		{"below the minimum: reported, never paused", "1s", idleFor(24 * time.Hour), false, 0, metav1.ConditionFalse, agentsv1alpha1.ReasonInvalidIdleTimeout},
	}
	ns := newNamespace(t)
	acts := &fakeActivity{act: map[string]wire.Activity{}}
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC))
	rec := record.NewFakeRecorder(100)
	r := sandbox.New(k8s, k8s, sandbox.Options{Activity: acts, Clock: clock, Recorder: rec})
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("idle-%d", i)
			acts.mu.Lock()
			acts.act[name] = tc.activity
			acts.mu.Unlock()
			mustCreateObj(t, testwrap.MakeSandbox(ns, name).Annotation(agentsv1alpha1.IdleTimeoutAnnotation, tc.timeout).Obj())
			setPodStatus(t, waitForPod(t, ns, name), running(fmt.Sprintf("10.0.9.%d", i+1)))
			testwrap.Eventually(t, "Ready=True", readyIs(t, ns, name, metav1.ConditionTrue, agentsv1alpha1.ReasonReady))

			req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
			res, err := r.Reconcile(context.Background(), req)
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if tc.wantPaused {
				// sandboxd says idle for long, but the controller has watched it only now (as
				// after an adoption from a pool): not idle yet. Its timeout later, it is.
				if got := getSandbox(t, ns, name).DesiredReplicas(); got != 1 {
					t.Fatalf("paused on the first look (replicas %d); want the idle clock to start when the controller first sees it", got)
				}
				clock.Step(5*time.Minute + time.Second)
				if _, err := r.Reconcile(context.Background(), req); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
			}
			sb := getSandbox(t, ns, name)
			paused := sb.DesiredReplicas() == 0
			if paused != tc.wantPaused {
				t.Fatalf("paused = %v (replicas %d); want %v", paused, sb.DesiredReplicas(), tc.wantPaused)
			}
			if tc.wantRequeue > 0 && (res.RequeueAfter <= 0 || res.RequeueAfter > tc.wantRequeue) {
				t.Errorf("requeue after %s; want within %s", res.RequeueAfter, tc.wantRequeue)
			}
			testwrap.Eventually(t, "the IdlePause condition", func() error {
				sb := getSandbox(t, ns, name)
				c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionIdlePause)
				if c == nil || c.Status != tc.wantIdle || c.Reason != tc.wantReason {
					return fmt.Errorf("IdlePause = %+v; want %s/%s", c, tc.wantIdle, tc.wantReason)
				}
				return nil
			})
			if !tc.wantPaused {
				return
			}
			if got := sb.Annotations[agentsv1alpha1.IdlePausedAnnotation]; got != clock.Now().Format(time.RFC3339) {
				t.Errorf("idle-paused-at = %q; want the controller's now %s", got, clock.Now().Format(time.RFC3339))
			}
			testwrap.Eventually(t, "Ready=False/IdlePaused, the pod gone", readyIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonIdlePaused))
			testwrap.Eventually(t, "the pod deleted", exists(podOf(ns, name), false))
			if e := <-rec.Events; !strings.Contains(e, agentsv1alpha1.ReasonIdlePaused) || !strings.Contains(e, "without activity") {
				t.Errorf("event %q; want an IdlePaused event saying it was idle", e)
			}

			// Resumed (as the router does on a request): the idle mark goes.
			patch := client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"replicas":1}}`))
			if err := k8s.Patch(context.Background(), sb, patch); err != nil {
				t.Fatal(err)
			}
			testwrap.Eventually(t, "the idle mark removed", func() error {
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)}); err != nil {
					return err
				}
				if v, ok := getSandbox(t, ns, name).Annotations[agentsv1alpha1.IdlePausedAnnotation]; ok {
					return fmt.Errorf("idle-paused-at still %q", v)
				}
				return nil
			})
		})
	}
	t.Run("a warm pool member is idle by design and never paused", func(t *testing.T) {
		pool := create(t, testwrap.MakeWarmPool(ns, "pool").Template("none").Replicas(0).Obj())
		name := "member"
		acts.mu.Lock()
		acts.act[name] = idleFor(24 * time.Hour)
		acts.mu.Unlock()
		mustCreateObj(t, testwrap.MakeSandbox(ns, name).Annotation(agentsv1alpha1.IdleTimeoutAnnotation, "10s").
			ControlledBy(pool, extv1alpha1.GroupVersion.WithKind("SandboxWarmPool")).Obj())
		setPodStatus(t, waitForPod(t, ns, name), running("10.0.9.99"))
		testwrap.Eventually(t, "Ready=True", readyIs(t, ns, name, metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
		req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
		for range 2 {
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			clock.Step(time.Hour)
		}
		if got := getSandbox(t, ns, name).DesiredReplicas(); got != 1 {
			t.Fatalf("a pool member was paused (replicas %d); want it left for the next claim", got)
		}
	})
	testwrap.Eventually(t, "a Warning event for the bad values", eventNames(ns, "Sandbox", "idle-3", corev1.EventTypeWarning,
		agentsv1alpha1.ReasonInvalidIdleTimeout, "is not a duration"))
}

// The idle pause is asked for on the template or the claim as well: every Sandbox made from
// them carries it, warm or cold.
func TestTemplatesAndClaimsPassTheIdlePauseToTheirSandboxes(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "idle-tpl").Annotation(agentsv1alpha1.IdleTimeoutAnnotation, "10m").Obj(),
		testwrap.MakeTemplate(ns, "plain").Obj(),
		testwrap.MakeWarmPool(ns, "pool").Template("plain").Replicas(1).Obj())
	testwrap.Eventually(t, "pool ready", poolReady(t, ns, "pool", 1))
	mustCreateObj(t,
		testwrap.MakeClaim(ns, "from-template").Template("idle-tpl").Obj(),
		testwrap.MakeClaim(ns, "from-claim-warm").Template("plain").
			Annotation(agentsv1alpha1.IdleTimeoutAnnotation, "2m").Annotation(agentsv1alpha1.WakeOnRequestAnnotation, "false").Obj())
	for claim, want := range map[string]map[string]string{
		"from-template":   {agentsv1alpha1.IdleTimeoutAnnotation: "10m"},
		"from-claim-warm": {agentsv1alpha1.IdleTimeoutAnnotation: "2m", agentsv1alpha1.WakeOnRequestAnnotation: "false"},
	} {
		testwrap.Eventually(t, claim+" Ready", claimReadyIs(t, ns, claim, metav1.ConditionTrue, ""))
		sb := getSandbox(t, ns, getClaim(t, ns, claim).Status.SandboxStatus.Name)
		for k, v := range want {
			if sb.Annotations[k] != v {
				t.Errorf("claim %s: Sandbox %s has %s=%q; want %q", claim, sb.Name, k, sb.Annotations[k], v)
			}
		}
		if claim == "from-claim-warm" && sb.Labels[extv1alpha1.LaunchTypeLabel] != extv1alpha1.LaunchTypeWarm {
			t.Errorf("claim %s started %s; want warm (the annotation rides on the adoption)", claim, sb.Labels[extv1alpha1.LaunchTypeLabel])
		}
	}
}
