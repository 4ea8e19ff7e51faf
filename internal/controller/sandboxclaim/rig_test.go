package sandboxclaim

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/internal/warmqueue"
)

// The Reconcile tests run the reconciler on controller-runtime's fake client: the "API server"
// holds the objects, the reconciler reads through a "cache" that shows the server as it is or,
// once frozen, as it was (a cache lagging the controller's own writes), and every write it makes
// is logged and can be made to fail.

const ns = "ns"

var poolGVK = extv1alpha1.GroupVersion.WithKind("SandboxWarmPool")

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{agentsv1alpha1.AddToScheme, extv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// builderIndexer registers the manager's field indexes (index.Register) on a fake client.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// newFakeAPI is an API server holding objs, with the status subresources and indexes of the
// real one. Every kind here is a custom resource, which the deduced type converter serves as the
// default one would; it spares each test binary the parse of client-go's whole OpenAPI schema.
func newFakeAPI(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithTypeConverters(managedfields.NewDeducedTypeConverter()).
		WithStatusSubresource(&agentsv1alpha1.Sandbox{}, &extv1alpha1.SandboxClaim{}, &extv1alpha1.SandboxWarmPool{})
	if err := index.Register(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

// rig is one claim reconciler on a fake API server.
type rig struct {
	t      *testing.T
	api    client.WithWatch // the API server; also the reconciler's apiReader
	cache  client.Client    // what the reconciler reads and writes through
	r      *Reconciler
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder

	mu       sync.Mutex
	snapshot client.WithWatch // the lagging cache's picture; nil: the cache is current
	writes   []string         // "verb Kind/name" of each write, in order
	faults   map[string]error // "verb Kind" -> the error every such write fails with
}

func newRig(t *testing.T, objs ...client.Object) *rig {
	t.Helper()
	g := &rig{t: t, api: newFakeAPI(t, objs...), clock: clocktesting.NewFakeClock(testNow),
		events: record.NewFakeRecorder(100), faults: map[string]error{}}
	g.cache = interceptor.NewClient(g.api, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return g.reader(c).Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return g.reader(c).List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return g.write("create", obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return g.write("patch", obj, func() error { return c.Patch(ctx, obj, p, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return g.write("update", obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			verb := "delete"
			if o := (&client.DeleteOptions{}).ApplyOptions(opts); o.PropagationPolicy != nil {
				verb = fmt.Sprintf("delete(%s)", *o.PropagationPolicy)
			}
			return g.write(verb, obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			return g.write(sub, obj, func() error { return c.SubResource(sub).Patch(ctx, obj, p, opts...) })
		},
	})
	g.r = g.replica()
	return g
}

// replica is another reconciler on the same API server and cache, with its own memory and warm
// queue: a second controller process (a new leader taking over, or one misconfigured to run
// twice).
func (g *rig) replica() *Reconciler {
	return New(g.cache, g.api, Options{Recorder: g.events, Clock: g.clock, Queue: warmqueue.NewQueue()})
}

func (g *rig) reader(live client.WithWatch) client.Reader {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.snapshot != nil {
		return g.snapshot
	}
	return live
}

func (g *rig) write(verb string, obj client.Object, do func() error) error {
	gvk, err := g.api.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.writes = append(g.writes, fmt.Sprintf("%s %s/%s", verb, gvk.Kind, obj.GetName()))
	fault := g.faults[verb+" "+gvk.Kind]
	g.mu.Unlock()
	if fault != nil {
		return fault
	}
	return do()
}

// failWrites makes every write of verb ("create", "patch", "delete", "status") on kind fail
// with err.
func (g *rig) failWrites(verb, kind string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.faults[verb+" "+kind] = err
}

// takeWrites returns the writes logged since the last call.
func (g *rig) takeWrites() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.writes
	g.writes = nil
	return w
}

// freezeCache makes the cache keep showing the API server as it is now, whatever is written
// later, until thawCache.
func (g *rig) freezeCache() {
	g.t.Helper()
	var objs []client.Object
	for _, list := range []client.ObjectList{&agentsv1alpha1.SandboxList{}, &extv1alpha1.SandboxClaimList{},
		&extv1alpha1.SandboxTemplateList{}, &extv1alpha1.SandboxWarmPoolList{}} {
		if err := g.api.List(context.Background(), list); err != nil {
			g.t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			g.t.Fatal(err)
		}
		for _, o := range items {
			objs = append(objs, o.(client.Object))
		}
	}
	snap := newFakeAPI(g.t, objs...)
	g.mu.Lock()
	g.snapshot = snap
	g.mu.Unlock()
}

func (g *rig) thawCache() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.snapshot = nil
}

// offer feeds Sandboxes to r's warm queue the way the watch does (warmQueueFeeder).
func (g *rig) offer(r *Reconciler, sbs ...*agentsv1alpha1.Sandbox) {
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
func (g *rig) claim(name string) *extv1alpha1.SandboxClaim {
	g.t.Helper()
	c := &extv1alpha1.SandboxClaim{}
	if err := g.api.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		g.t.Fatal(err)
	}
	return c
}

// sandbox is the Sandbox as the API server holds it, nil when it is gone.
func (g *rig) sandbox(name string) *agentsv1alpha1.Sandbox {
	g.t.Helper()
	sb := &agentsv1alpha1.Sandbox{}
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
	list := &agentsv1alpha1.SandboxList{}
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
func (g *rig) emitted() []string {
	var out []string
	for {
		select {
		case e := <-g.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// The fixtures: template python, pool "pool" of it, claims of it, and the pool's members.

// pythonTemplate is the template claims and the pool are served from. Each variant of its spec
// needs its own UID: blueprint.Hash caches by UID and resourceVersion, and the fake API server
// gives every object it is seeded with the same resourceVersion.
func pythonTemplate() *testwrap.TemplateWrapper {
	return testwrap.MakeTemplate(ns, "python").UID("python-uid")
}

func warmPool(name string) *extv1alpha1.SandboxWarmPool {
	return testwrap.MakeWarmPool(ns, name).UID(types.UID(name + "-uid")).Template("python").Replicas(2).Obj()
}

func claimOf(name string) *testwrap.ClaimWrapper {
	return testwrap.MakeClaim(ns, name).UID(types.UID(name + "-uid")).Template("python")
}

// warmMember is a ready, unclaimed member of pool made from tmpl, labelled as the pool
// controller labels its members.
func warmMember(pool *extv1alpha1.SandboxWarmPool, tmpl *extv1alpha1.SandboxTemplate, name, ip string) *testwrap.SandboxWrapper {
	return testwrap.MakeSandbox(ns, name).UID(types.UID(name+"-uid")).
		Label(extv1alpha1.TemplateHashLabel, blueprint.Hash(tmpl)).Label(extv1alpha1.WarmPoolLabel, "hash-of-"+pool.Name).
		Annotation(extv1alpha1.TemplateRefAnnotation, tmpl.Name).
		ControlledBy(pool, poolGVK).ReadyWith(ip)
}
