package sandboxclaim

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/warmqueue"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap/fakeapi"
)

// The Reconcile tests run the reconciler on a fake API server (fakeapi): the reconciler reads
// through a cache that shows the server as it is or, once frozen, as it was (a cache lagging the
// controller's own writes), and every write it makes is logged and can be made to fail.

const ns = "ns"

var poolGVK = extv1beta1.GroupVersion.WithKind("SandboxWarmPool")

// rig is one claim reconciler on a fake API server.
type rig struct {
	t      *testing.T
	fake   *fakeapi.Server
	api    client.WithWatch // the API server; also the reconciler's apiReader
	r      *Reconciler
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder
}

func newRig(t *testing.T, objs ...client.Object) *rig {
	t.Helper()
	fake := fakeapi.New(t, fakeapi.WithObjects(objs...), fakeapi.WithIndexes(),
		fakeapi.WithStatusSubresource(&agentsv1beta1.Sandbox{}, &extv1beta1.SandboxClaim{}, &extv1beta1.SandboxWarmPool{}))
	g := &rig{t: t, fake: fake, api: fake.API, clock: clocktesting.NewFakeClock(testNow), events: record.NewFakeRecorder(100)}
	g.r = g.replica()
	return g
}

// replica is another reconciler on the same API server and cache, with its own memory and warm
// queue: a second controller process (a new leader taking over, or one misconfigured to run
// twice).
func (g *rig) replica() *Reconciler {
	return New(g.fake.Cache, g.api, Options{Recorder: g.events, Clock: g.clock, Queue: warmqueue.NewQueue()})
}

// failWrites makes every write of verb ("create", "patch", "delete", "status") on kind fail
// with err.
func (g *rig) failWrites(verb, kind string, err error) { g.fake.FailWrites(verb, kind, err) }

// takeWrites returns the writes tried since the last call, failed or not: "verb Kind/name",
// a delete's verb naming its propagation ("delete(Background)").
func (g *rig) takeWrites() []string {
	var out []string
	for _, w := range g.fake.TakeWrites() {
		if w.Propagation != "" {
			w.Verb = fmt.Sprintf("%s(%s)", w.Verb, w.Propagation)
		}
		out = append(out, w.String())
	}
	return out
}

// freezeCache makes the cache keep showing the API server as it is now, whatever is written
// later, until thawCache.
func (g *rig) freezeCache() {
	g.fake.Freeze(&agentsv1beta1.SandboxList{}, &extv1beta1.SandboxClaimList{},
		&extv1beta1.SandboxTemplateList{}, &extv1beta1.SandboxWarmPoolList{})
}

func (g *rig) thawCache() { g.fake.Thaw() }

// offer feeds Sandboxes to r's warm queue the way the watch does (warmQueueFeeder).
func (g *rig) offer(r *Reconciler, sbs ...*agentsv1beta1.Sandbox) {
	for _, sb := range sbs {
		feed(r.queue, sb)
	}
}

func (g *rig) reconcileWith(r *Reconciler, claim string) (ctrl.Result, error) {
	return r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: claim}})
}

func (g *rig) reconcile(claim string) (ctrl.Result, error) { return g.reconcileWith(g.r, claim) }

// mustReconcile reconciles the claim and fails the test on an error.
func (g *rig) mustReconcile(claim string) ctrl.Result {
	g.t.Helper()
	res, err := g.reconcile(claim)
	if err != nil {
		g.t.Fatalf("Reconcile(%s): %v", claim, err)
	}
	return res
}

// claim is the claim as the API server holds it, nil when it is gone.
func (g *rig) claim(name string) *extv1beta1.SandboxClaim {
	g.t.Helper()
	c := &extv1beta1.SandboxClaim{}
	if err := g.api.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		g.t.Fatal(err)
	}
	return c
}

// sandbox is the Sandbox as the API server holds it, nil when it is gone.
func (g *rig) sandbox(name string) *agentsv1beta1.Sandbox {
	g.t.Helper()
	sb := &agentsv1beta1.Sandbox{}
	if err := g.api.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, sb); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		g.t.Fatal(err)
	}
	return sb
}

// sandboxNames lists the Sandboxes the API server holds.
func (g *rig) sandboxNames() []string {
	g.t.Helper()
	list := &agentsv1beta1.SandboxList{}
	if err := g.api.List(context.Background(), list); err != nil {
		g.t.Fatal(err)
	}
	var out []string
	for _, sb := range list.Items {
		out = append(out, sb.Name)
	}
	return out
}

// emitted drains the events recorded so far ("Type Reason message").
func (g *rig) emitted() []string { return fakeapi.DrainEvents(g.events) }

// The fixtures: template python, pool "pool" of it, claims of it, and the pool's members.

// pythonTemplate is the template claims and the pool are served from. Each variant of its spec
// needs its own UID: blueprint.Hash caches by UID and resourceVersion, and the fake API server
// gives every object it is seeded with the same resourceVersion.
func pythonTemplate() *testwrap.TemplateWrapper {
	return testwrap.MakeTemplate(ns, "python").UID("python-uid")
}

func warmPool(name string) *extv1beta1.SandboxWarmPool {
	return testwrap.MakeWarmPool(ns, name).UID(types.UID(name + "-uid")).Template("python").Replicas(2).Hub()
}

func claimOf(name string) *testwrap.ClaimWrapper {
	return testwrap.MakeClaim(ns, name).UID(types.UID(name + "-uid")).Template("python")
}

// warmMember is a ready, unclaimed member of pool made from tmpl, labelled as the pool
// controller labels its members.
func warmMember(pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, name, ip string) *testwrap.SandboxWrapper {
	return testwrap.MakeSandbox(ns, name).UID(types.UID(name+"-uid")).
		Label(extv1beta1.TemplateHashLabel, blueprint.Builder{}.Hash(tmpl)).Label(extv1beta1.WarmPoolLabel, "hash-of-"+pool.Name).
		Annotation(extv1beta1.TemplateRefAnnotation, tmpl.Name).
		ControlledBy(pool, poolGVK).ReadyWith(ip)
}
