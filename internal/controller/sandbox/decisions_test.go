package sandbox

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/logtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// reconcileLogged runs one pass with a logger at V(2) in the context, as controller-runtime
// hands one to Reconcile, and returns what was logged.
func (g *rig) reconcileLogged() *logtest.Recorder {
	g.t.Helper()
	logger, rec := logtest.New(2)
	ctx := log.IntoContext(context.Background(), logger)
	if _, err := g.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: g.name}}); err != nil {
		g.t.Fatalf("Reconcile: %v", err)
	}
	return rec
}

// Each decision on a Sandbox is a V(2) line naming the object it concerns.
func TestSandboxDecisionsAreLoggedAtV2(t *testing.T) {
	del := agentsv1beta1.ShutdownPolicyDelete
	// paused is a running Sandbox whose user just set replicas: 0.
	paused := func(t *testing.T) *rig {
		g := newRig(t, []client.Object{aSandbox().Hub()})
		g.reconcile()
		g.podRunsReady()
		g.reconcile()
		sb := g.sandbox()
		g.update(sb, func() { sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
		return g
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) *rig // a rig whose next pass makes the decision
		msg   string
		want  map[string]any // the values the line must carry (others may follow)
	}{
		{name: "the pod created",
			setup: func(t *testing.T) *rig { return newRig(t, []client.Object{aSandbox().Hub()}) },
			msg:   "created the pod", want: map[string]any{"pod": logtest.Ref(testNS, testSB)}},
		{name: "the Service created",
			setup: func(t *testing.T) *rig { return newRig(t, []client.Object{aSandbox().Hub()}) },
			msg:   "created the Service", want: map[string]any{"service": logtest.Ref(testNS, testSB)}},
		{name: "a pause deletes the pod",
			setup: paused,
			msg:   "paused (replicas 0): deleting the pod", want: map[string]any{"pod": logtest.Ref(testNS, testSB), "idlePaused": false}},
		{name: "expiry under Delete",
			setup: func(t *testing.T) *rig { g := running(t, expiring(&del)); g.clock.Step(time.Hour); return g },
			msg:   "sandbox expired; deleting it", want: map[string]any{"shutdownPolicy": "Delete"}},
		{name: "expiry under Retain",
			setup: func(t *testing.T) *rig { g := running(t, expiring(nil)); g.clock.Step(time.Hour); return g },
			msg:   "sandbox expired; its pod and Service deleted, the sandbox and its volumes kept", want: map[string]any{"shutdownPolicy": "Retain"}},
		{name: "a requeue at the expiry",
			setup: func(t *testing.T) *rig { return running(t, expiring(nil)) },
			msg:   "requeue", want: map[string]any{"after": time.Hour.String(), "why": "expiry"}},
		{name: "an idle pause",
			setup: func(t *testing.T) *rig {
				act := &fakeActivity{act: wire.Activity{IdleSeconds: 3600, LastActivity: epoch.Add(-time.Hour)}}
				g := readyWithActivity(t, idleAfter("1m").Hub(), act)
				g.clock.Step(time.Minute)
				return g
			},
			msg: "paused for being idle", want: map[string]any{"timeout": time.Minute.String()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.setup(t).reconcileLogged().Check(2, tc.msg, tc.want); err != nil {
				t.Error(err)
			}
		})
	}
}
