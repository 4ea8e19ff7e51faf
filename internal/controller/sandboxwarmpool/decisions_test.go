package sandboxwarmpool

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/logtest"
)

// reconcileLogged reconciles the pool with a logger at V(2) in the context, as
// controller-runtime hands one to Reconcile, and returns what was logged.
func (g *rig) reconcileLogged() *logtest.Recorder {
	g.t.Helper()
	logger, rec := logtest.New(2)
	ctx := log.IntoContext(context.Background(), logger)
	if _, err := g.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "pool"}}); err != nil {
		g.t.Fatalf("Reconcile: %v", err)
	}
	return rec
}

// Each decision on a pool is a V(2) line naming the members it concerns.
func TestPoolDecisionsAreLoggedAtV2(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := thePool(1).Hub()
	cases := []struct {
		name     string
		replicas int32
		members  []*agentsv1beta1.Sandbox
		msg      string
		want     map[string]any // the values the line must carry (others may follow)
	}{
		{name: "scale up", replicas: 2, members: []*agentsv1beta1.Sandbox{readyMember(pool, tmpl, "a", time.Hour)},
			msg: "scaling up", want: map[string]any{"have": float64(1), "desired": float64(2), "creating": float64(1)}},
		{name: "scale down names the members it removes", replicas: 1,
			members: []*agentsv1beta1.Sandbox{readyMember(pool, tmpl, "old", time.Hour), readyMember(pool, tmpl, "new", time.Minute)},
			msg:     "scaling down", want: map[string]any{"sandboxes": []any{logtest.Ref("ns", "new")}}},
		{name: "each delete names its member", replicas: 0, members: []*agentsv1beta1.Sandbox{readyMember(pool, tmpl, "a", time.Hour)},
			msg: "deleted a member", want: map[string]any{"sandbox": logtest.Ref("ns", "a")}},
		{name: "an overdue member is replaced", replicas: 1,
			members: []*agentsv1beta1.Sandbox{startingMember(pool, tmpl, "slow", DefaultMemberReadyTimeout+time.Second)},
			msg:     "replacing members not Ready in time", want: map[string]any{"sandboxes": []any{logtest.Ref("ns", "slow")}}},
		{name: "a requeue when a starting member is due", replicas: 1,
			members: []*agentsv1beta1.Sandbox{startingMember(pool, tmpl, "m", time.Minute)},
			msg:     "requeue when the next starting member is due Ready", want: map[string]any{"requeueAfter": (DefaultMemberReadyTimeout - time.Minute).String()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{tmpl, thePool(tc.replicas).Hub()}
			for _, m := range tc.members {
				objs = append(objs, m)
			}
			g := newRig(t, Options{}, objs...)
			if err := g.reconcileLogged().Check(2, tc.msg, tc.want); err != nil {
				t.Error(err)
			}
		})
	}
}

// A created member's generated name is logged, so a member can be followed from its creation.
func TestPoolLogsTheNameOfEachMemberItCreates(t *testing.T) {
	g := newRig(t, Options{}, pythonTemplate().Hub(), thePool(1).Hub())
	rec := g.reconcileLogged()
	line, ok := rec.Find("created a warm member")
	if !ok {
		t.Fatalf("no line for the created member; logged %q", rec.Messages())
	}
	var want map[string]any
	for name := range g.members() {
		want = logtest.Ref("ns", name)
	}
	if d := cmp.Diff(want, line.Values["sandbox"]); d != "" {
		t.Errorf("created member (-want +got):\n%s", d)
	}
}
