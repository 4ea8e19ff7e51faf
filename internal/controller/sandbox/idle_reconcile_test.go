package sandbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// idleAfter is a Sandbox that asks to be paused after timeout idle; with "1m" activity is
// checked every 15 s.
func idleAfter(timeout string) *testwrap.SandboxWrapper {
	return aSandbox().Annotation(agentsv1beta1.IdleTimeoutAnnotation, timeout)
}

// readyWithActivity brings sb to Ready at the epoch with act as what sandboxd reports (nil: the
// controller has no way to ask).
func readyWithActivity(t *testing.T, sb *agentsv1beta1.Sandbox, act *fakeActivity) *rig {
	t.Helper()
	var opts []rigOption
	if act != nil {
		opts = append(opts, withActivity(act))
	}
	g := newRig(t, []client.Object{sb}, opts...)
	g.reconcile()
	g.podRunsReady()
	g.reconcile()
	g.wantReady(metav1.ConditionTrue, agentsv1beta1.ReasonReady)
	g.drainEvents()
	return g
}

func TestIdlePauseDecision(t *testing.T) {
	idleFor := func(d time.Duration) *fakeActivity {
		return &fakeActivity{act: wire.Activity{IdleSeconds: d.Seconds(), LastActivity: epoch.Add(-d)}}
	}
	pool := testwrap.MakeWarmPool(testNS, "pool").UID("pool-uid").Hub()
	tests := []struct {
		name        string
		sb          *agentsv1beta1.Sandbox
		act         *fakeActivity
		watched     time.Duration // how long after Ready the deciding pass runs
		wantPaused  bool
		wantRequeue time.Duration
		wantAsked   bool
	}{
		{name: "idle an hour by sandboxd, but watched by this process for no time: not yet",
			sb: idleAfter("1m").Hub(), act: idleFor(time.Hour), wantRequeue: 15 * time.Second, wantAsked: true},
		{name: "idle for the whole timeout it was watched: paused",
			sb: idleAfter("1m").Hub(), act: idleFor(time.Hour), watched: time.Minute, wantPaused: true, wantAsked: true},
		{name: "a command runs: not paused, asked again at the check interval",
			sb: idleAfter("1m").Hub(), act: &fakeActivity{act: wire.Activity{Active: true, RunningProcesses: 1}}, watched: time.Hour,
			wantRequeue: 15 * time.Second, wantAsked: true},
		{name: "idle 50 s of 60: asked again when the timeout would be reached",
			sb: idleAfter("1m").Hub(), act: idleFor(50 * time.Second), watched: time.Hour, wantRequeue: 10 * time.Second, wantAsked: true},
		{name: "sandboxd unreachable: not knowing is no reason to pause",
			sb: idleAfter("1m").Hub(), act: &fakeActivity{err: errors.New("connection refused")}, watched: time.Hour,
			wantRequeue: 15 * time.Second, wantAsked: true},
		{name: "no idle-timeout: never asked",
			sb: aSandbox().Hub(), act: idleFor(time.Hour), watched: time.Hour},
		{name: "an unclaimed warm pool member waits idle by design: never asked",
			sb:  idleAfter("1m").ControlledBy(pool, extv1beta1.GroupVersion.WithKind("SandboxWarmPool")).Hub(),
			act: idleFor(time.Hour), watched: time.Hour},
		{name: "a timeout under the minimum: never asked",
			sb: idleAfter("5s").Hub(), act: idleFor(time.Hour), watched: time.Hour},
		{name: "no way to ask sandboxd: never paused",
			sb: idleAfter("1m").Hub(), watched: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := readyWithActivity(t, tt.sb, tt.act)
			if tt.act != nil {
				tt.act.asked = 0
			}
			g.clock.Step(tt.watched)
			res := g.reconcile()

			sb := g.sandbox()
			paused := sb.DesiredReplicas() == agentsv1beta1.PausedReplicas
			if paused != tt.wantPaused {
				t.Fatalf("paused = %v, want %v (operatingMode %q, annotations %v)", paused, tt.wantPaused, sb.Spec.OperatingMode, sb.Annotations)
			}
			if res.RequeueAfter != tt.wantRequeue {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tt.wantRequeue)
			}
			if asked := tt.act != nil && tt.act.asked > 0; asked != tt.wantAsked {
				t.Errorf("sandboxd asked: %v, want %v", asked, tt.wantAsked)
			}
			if !paused {
				if _, marked := sb.Annotations[agentsv1beta1.IdlePausedAnnotation]; marked {
					t.Errorf("not paused but marked %s", agentsv1beta1.IdlePausedAnnotation)
				}
			}
		})
	}
}

// An idle pause is a pause like the user's: the pod goes, the volumes and Service stay; the
// Sandbox says when and why, and how a request wakes it.
func TestAnIdlePauseIsToldAndKeepsTheSandboxWakeable(t *testing.T) {
	act := &fakeActivity{act: wire.Activity{IdleSeconds: 3600, LastActivity: epoch.Add(-time.Hour)}}
	g := readyWithActivity(t, idleAfter("1m").Hub(), act)
	g.clock.Step(time.Minute)
	g.reconcile()

	at := epoch.Add(time.Minute).UTC().Format(time.RFC3339)
	if got := g.sandbox().Annotations[agentsv1beta1.IdlePausedAnnotation]; got != at {
		t.Errorf("annotation %s = %q, want the pause's time %s", agentsv1beta1.IdlePausedAnnotation, got, at)
	}
	if events := g.eventReasons(); len(events) != 1 || events[0] != "Normal "+agentsv1beta1.ReasonIdlePaused {
		t.Errorf("events %v, want one Normal %s", events, agentsv1beta1.ReasonIdlePaused)
	}

	g.reconcile() // the Sandbox's update brings the next pass
	g.reconcile() // and the pod's deletion the one after
	if g.pod() != nil || g.service() == nil {
		t.Errorf("idle-paused: pod exists %v, Service exists %v; want the pod gone and the Service kept", g.pod() != nil, g.service() != nil)
	}
	g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonIdlePaused)
	if c := g.condition(agentsv1beta1.SandboxConditionReady); !strings.Contains(c.Message, "the next request through the router resumes it") {
		t.Errorf("Ready message %q, want it to say a request resumes it", c.Message)
	}
}

// The pause is written only over the version of the Sandbox it was decided on: a change made
// meanwhile (a user's edit, a resume) wins, and activity is looked at again a second later.
func TestAnIdlePauseNeverOverwritesAConcurrentChange(t *testing.T) {
	act := &fakeActivity{act: wire.Activity{IdleSeconds: 3600}}
	g := readyWithActivity(t, idleAfter("1m").Hub(), act)
	g.freeze() // the cache has not seen the user's edit below
	sb := g.sandbox()
	g.update(sb, func() { sb.Labels = map[string]string{"owner": "alice"} })
	g.clock.Step(time.Minute)

	if res := g.reconcile(); res.RequeueAfter != time.Second {
		t.Errorf("RequeueAfter = %v after the pause conflicted, want 1s", res.RequeueAfter)
	}
	sb = g.sandbox()
	if sb.Labels["owner"] != "alice" {
		t.Errorf("the user's label was lost: labels %v", sb.Labels)
	}
	if sb.DesiredReplicas() != agentsv1beta1.RunningReplicas {
		t.Errorf("replicas = %d, want the Sandbox left running after the conflict", sb.DesiredReplicas())
	}
	if events := g.drainEvents(); len(events) != 0 {
		t.Errorf("events %v, want none for a pause that did not happen", events)
	}
}

// Resumed (by a request through the router or by hand), a Sandbox is no longer idle-paused.
func TestAResumedSandboxLosesItsIdlePauseMark(t *testing.T) {
	sb := idleAfter("1m").Annotation(agentsv1beta1.IdlePausedAnnotation, epoch.Format(time.RFC3339)).Hub()
	g := newRig(t, []client.Object{sb})
	g.reconcile()
	if _, marked := g.sandbox().Annotations[agentsv1beta1.IdlePausedAnnotation]; marked {
		t.Errorf("a running Sandbox still carries %s", agentsv1beta1.IdlePausedAnnotation)
	}
	if g.pod() == nil {
		t.Error("no pod for the resumed Sandbox")
	}

	paused := idleAfter("1m").Replicas(0).Annotation(agentsv1beta1.IdlePausedAnnotation, epoch.Format(time.RFC3339)).Hub()
	g = newRig(t, []client.Object{paused})
	g.reconcile()
	if _, marked := g.sandbox().Annotations[agentsv1beta1.IdlePausedAnnotation]; !marked {
		t.Errorf("a still-paused Sandbox lost %s", agentsv1beta1.IdlePausedAnnotation)
	}
}

// An unusable idle-timeout is told once, as a Warning and on the IdlePause condition; the
// Sandbox runs on, never paused for being idle.
func TestAnInvalidIdleTimeoutIsToldOnce(t *testing.T) {
	g := newRig(t, []client.Object{idleAfter("soon").Hub()})
	g.reconcile()
	c := g.condition(agentsv1beta1.SandboxConditionIdlePause)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != agentsv1beta1.ReasonInvalidIdleTimeout {
		t.Errorf("IdlePause %+v, want False/%s", c, agentsv1beta1.ReasonInvalidIdleTimeout)
	}
	if events := g.eventReasons(); len(events) != 1 || events[0] != "Warning "+agentsv1beta1.ReasonInvalidIdleTimeout {
		t.Errorf("events %v, want one Warning %s", events, agentsv1beta1.ReasonInvalidIdleTimeout)
	}
	g.reconcile()
	if events := g.drainEvents(); len(events) != 0 {
		t.Errorf("second pass sent %v, want nothing more", events)
	}
	if g.pod() == nil {
		t.Error("no pod: an invalid idle-timeout must not stop the Sandbox")
	}
}
