package sandboxwarmpool

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
	"github.com/agent-sandbox/agent-sandbox/internal/podmeta"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The Reconcile tests run the pool reconciler on controller-runtime's fake client: the "API
// server" holds the objects, the reconciler reads through a "cache" that shows the server as it
// is or, once frozen, as it was then (a cache lagging the controller's own writes), and every write
// is logged and can be made to fail.

var poolGVK = extv1alpha1.GroupVersion.WithKind("SandboxWarmPool")

// builderIndexer registers the manager's field indexes (index.Register) on a fake client.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// newFakeAPI is an API server holding objs, with the status subresources and indexes of the
// real one. Every kind here is a custom resource, which the deduced type converter serves as the
// default one would; it spares the test binary the parse of client-go's whole OpenAPI schema.
func newFakeAPI(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{agentsv1alpha1.AddToScheme, extv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithTypeConverters(managedfields.NewDeducedTypeConverter()).
		WithStatusSubresource(&agentsv1alpha1.Sandbox{}, &extv1alpha1.SandboxWarmPool{})
	if err := index.Register(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

// rig is one pool reconciler on a fake API server.
type rig struct {
	t      *testing.T
	api    client.WithWatch
	cache  client.Client
	r      *Reconciler
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder

	mu       sync.Mutex
	snapshot client.WithWatch // the lagging cache's picture; nil: the cache is current
	writes   []string         // "verb Kind/name" of each write
	faults   map[string]error // "verb Kind" -> the error every such write fails with
}

func newRig(t *testing.T, opts Options, objs ...client.Object) *rig {
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
			obj.SetCreationTimestamp(metav1.NewTime(g.clock.Now())) // as the API server stamps it
			return g.write("create", obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return g.write("delete", obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return g.write("patch", obj, func() error { return c.Patch(ctx, obj, p, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			return g.write(sub, obj, func() error { return c.SubResource(sub).Patch(ctx, obj, p, opts...) })
		},
	})
	if opts.Recorder == nil {
		opts.Recorder = g.events
	}
	if opts.Clock == nil {
		opts.Clock = g.clock
	}
	g.r = New(g.cache, opts)
	return g
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
	fault := g.faults[verb+" "+gvk.Kind]
	g.mu.Unlock()
	if fault == nil {
		err = do()
	} else {
		err = fault
	}
	if err == nil { // generated names are known once the create succeeded
		g.mu.Lock()
		g.writes = append(g.writes, fmt.Sprintf("%s %s/%s", verb, gvk.Kind, obj.GetName()))
		g.mu.Unlock()
	}
	return err
}

// failWrites makes every write of verb ("create", "delete", "status") on kind fail with err
// (nil: succeed again).
func (g *rig) failWrites(verb, kind string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.faults[verb+" "+kind] = err
}

// takeWrites returns the successful writes since the last call, sorted (members are written
// in parallel).
func (g *rig) takeWrites() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.writes
	g.writes = nil
	slices.Sort(w)
	return w
}

// freezeCache makes the cache keep showing the API server as it is now, for the rest of the test.
func (g *rig) freezeCache() {
	g.t.Helper()
	var objs []client.Object
	for _, list := range []client.ObjectList{&agentsv1alpha1.SandboxList{}, &extv1alpha1.SandboxTemplateList{}, &extv1alpha1.SandboxWarmPoolList{}} {
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
func (g *rig) pool() *extv1alpha1.SandboxWarmPool {
	g.t.Helper()
	p := &extv1alpha1.SandboxWarmPool{}
	if err := g.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "pool"}, p); err != nil {
		g.t.Fatal(err)
	}
	return p
}

// members are the Sandboxes the API server holds that the pool controls, by name.
func (g *rig) members() map[string]*agentsv1alpha1.Sandbox {
	g.t.Helper()
	list := &agentsv1alpha1.SandboxList{}
	if err := g.api.List(context.Background(), list); err != nil {
		g.t.Fatal(err)
	}
	pool := g.pool()
	out := map[string]*agentsv1alpha1.Sandbox{}
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], pool) {
			out[list.Items[i].Name] = &list.Items[i]
		}
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

// The fixtures: pool "pool" of template python, and its members.

func pythonTemplate() *testwrap.TemplateWrapper {
	return testwrap.MakeTemplate("ns", "python").UID("python-uid")
}

func thePool(replicas int32) *testwrap.WarmPoolWrapper {
	return testwrap.MakeWarmPool("ns", "pool").UID("pool-uid").Template("python").Replicas(replicas)
}

// poolMember is a member of pool made from tmpl age ago, labelled as NewMember labels it; its
// Ready condition is for the test to add.
func poolMember(pool *extv1alpha1.SandboxWarmPool, tmpl *extv1alpha1.SandboxTemplate, name string, age time.Duration) *testwrap.SandboxWrapper {
	made := NewMember(pool, tmpl, podmeta.Rules{})
	return testwrap.MakeSandbox("ns", name).UID(types.UID(name+"-uid")).Created(testNow.Add(-age)).
		Labels(made.Labels).Annotations(made.Annotations).ControlledBy(pool, poolGVK)
}

func readyMember(pool *extv1alpha1.SandboxWarmPool, tmpl *extv1alpha1.SandboxTemplate, name string, age time.Duration) *agentsv1alpha1.Sandbox {
	return poolMember(pool, tmpl, name, age).ReadyWith("10.0.0.1").Obj()
}

func startingMember(pool *extv1alpha1.SandboxWarmPool, tmpl *extv1alpha1.SandboxTemplate, name string, age time.Duration) *agentsv1alpha1.Sandbox {
	return poolMember(pool, tmpl, name, age).Condition(metav1.Condition{Type: agentsv1alpha1.SandboxConditionReady,
		Status: metav1.ConditionFalse, Reason: agentsv1alpha1.ReasonPodNotReady, Message: "container runtime not ready"}).Obj()
}
