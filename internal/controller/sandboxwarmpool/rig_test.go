package sandboxwarmpool

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap/fakeapi"
)

// The Reconcile tests run the pool reconciler on a fake API server (fakeapi): the reconciler
// reads through a cache that shows the server as it is or, once frozen, as it was then (a cache
// lagging the controller's own writes), and every write is logged and can be made to fail.

var poolGVK = extv1beta1.GroupVersion.WithKind("SandboxWarmPool")

// rig is one pool reconciler on a fake API server.
type rig struct {
	t      *testing.T
	fake   *fakeapi.Server
	api    client.WithWatch
	r      *Reconciler
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder
}

func newRig(t *testing.T, opts Options, objs ...client.Object) *rig {
	t.Helper()
	clock := clocktesting.NewFakeClock(testNow)
	fake := fakeapi.New(t, fakeapi.WithObjects(objs...), fakeapi.WithIndexes(), fakeapi.WithCreationStamps(clock),
		fakeapi.WithStatusSubresource(&agentsv1beta1.Sandbox{}, &extv1beta1.SandboxWarmPool{}))
	g := &rig{t: t, fake: fake, api: fake.API, clock: clock, events: record.NewFakeRecorder(100)}
	if opts.Recorder == nil {
		opts.Recorder = g.events
	}
	if opts.Clock == nil {
		opts.Clock = g.clock
	}
	g.r = New(fake.Cache, opts)
	return g
}

// failWrites makes every write of verb ("create", "delete", "status") on kind fail with err
// (nil: succeed again).
func (g *rig) failWrites(verb, kind string, err error) { g.fake.FailWrites(verb, kind, err) }

// takeWrites returns the successful writes since the last call, "verb Kind/name", sorted
// (members are written in parallel).
func (g *rig) takeWrites() []string {
	var out []string
	for _, w := range g.fake.TakeWrites() {
		if w.Err == nil {
			out = append(out, w.String())
		}
	}
	slices.Sort(out)
	return out
}

// freezeCache makes the cache keep showing the API server as it is now, for the rest of the test.
func (g *rig) freezeCache() {
	g.fake.Freeze(&agentsv1beta1.SandboxList{}, &extv1beta1.SandboxTemplateList{}, &extv1beta1.SandboxWarmPoolList{})
}

func (g *rig) reconcile() (ctrl.Result, error) {
	return g.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "pool"}})
}

func (g *rig) mustReconcile() ctrl.Result {
	g.t.Helper()
	res, err := g.reconcile()
	if err != nil {
		g.t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// pool is the pool as the API server holds it.
func (g *rig) pool() *extv1beta1.SandboxWarmPool {
	g.t.Helper()
	p := &extv1beta1.SandboxWarmPool{}
	if err := g.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "pool"}, p); err != nil {
		g.t.Fatal(err)
	}
	return p
}

// members are the Sandboxes the API server holds that the pool controls, by name.
func (g *rig) members() map[string]*agentsv1beta1.Sandbox {
	g.t.Helper()
	list := &agentsv1beta1.SandboxList{}
	if err := g.api.List(context.Background(), list); err != nil {
		g.t.Fatal(err)
	}
	pool := g.pool()
	out := map[string]*agentsv1beta1.Sandbox{}
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], pool) {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	return out
}

// emitted drains the events recorded so far ("Type Reason message").
func (g *rig) emitted() []string { return fakeapi.DrainEvents(g.events) }

// The fixtures: pool "pool" of template python, and its members.

func pythonTemplate() *testwrap.TemplateWrapper {
	return testwrap.MakeTemplate("ns", "python").UID("python-uid")
}

func thePool(replicas int32) *testwrap.WarmPoolWrapper {
	return testwrap.MakeWarmPool("ns", "pool").UID("pool-uid").Template("python").Replicas(replicas)
}

// poolMember is a member of pool made from tmpl age ago, labelled as NewMember labels it; its
// Ready condition is for the test to add.
func poolMember(pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, name string, age time.Duration) *testwrap.SandboxWrapper {
	made := NewMember(pool, tmpl, blueprint.Builder{})
	return testwrap.MakeSandbox("ns", name).UID(types.UID(name+"-uid")).Created(testNow.Add(-age)).
		Labels(made.Labels).Annotations(made.Annotations).ControlledBy(pool, poolGVK)
}

func readyMember(pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, name string, age time.Duration) *agentsv1beta1.Sandbox {
	return poolMember(pool, tmpl, name, age).ReadyWith("10.0.0.1").Hub()
}

func startingMember(pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, name string, age time.Duration) *agentsv1beta1.Sandbox {
	return poolMember(pool, tmpl, name, age).Condition(metav1.Condition{Type: agentsv1beta1.SandboxConditionReady,
		Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonPodNotReady, Message: "container runtime not ready"}).Hub()
}
