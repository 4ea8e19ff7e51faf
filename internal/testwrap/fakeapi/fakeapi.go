// Package fakeapi is the API server and manager cache the controllers' Reconcile tests run
// against, on controller-runtime's fake client:
//
//	api := fakeapi.New(t, fakeapi.WithObjects(objs...), fakeapi.WithStatusSubresource(&agentsv1beta1.Sandbox{}), fakeapi.WithIndexes())
//	r := New(api.Cache, api.API, opts) // the reconciler reads and writes through the cache
//	api.FailWrites("create", "Pod", boom)
//	api.Freeze(&agentsv1beta1.SandboxList{}) // the cache lags: it keeps showing the Sandboxes as they are now
//	... r.Reconcile ...
//	api.TakeWrites() // what the pass wrote, in order
//
// Server.API is the API server. Server.Cache stands where a manager's cache would: its reads can
// lag the server (Freeze, Hide), every write through it is logged (Writes, TakeWrites) and can be
// made to fail (FailWrites). Writes made on API directly, as another client would, are neither.
//
// Like its parent testwrap, this is a test-only package (TestNoProductionImports).
package fakeapi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
)

// Scheme knows client-go's kinds and the project's v1beta1 and extensions/v1beta1 ones (the storage version the controllers speak). It is
// built once: building it is a large part of a test's time under -race, and nothing changes it.
var Scheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // registering generated types cannot fail
		}
	}
	return s
})

// Option configures New.
type Option func(*config)

type config struct {
	objects []client.Object
	status  []client.Object
	indexes bool
	clock   clock.PassiveClock
}

// WithObjects seeds the API server with objs.
func WithObjects(objs ...client.Object) Option {
	return func(c *config) { c.objects = append(c.objects, objs...) }
}

// WithStatusSubresource gives the kinds of objs a status subresource, as their CRDs do.
func WithStatusSubresource(objs ...client.Object) Option {
	return func(c *config) { c.status = append(c.status, objs...) }
}

// WithIndexes registers the manager's field indexes (index.Register).
func WithIndexes() Option { return func(c *config) { c.indexes = true } }

// WithCreationStamps stamps each object created through the cache with clk's time, as the API
// server would (the fake one leaves creationTimestamp as given).
func WithCreationStamps(clk clock.PassiveClock) Option {
	return func(c *config) { c.clock = clk }
}

// Write is one write made through the cache.
type Write struct {
	Verb        string // "create", "update", "patch", "delete", or the subresource written ("status")
	Kind, Name  string // Name is read after the write, so a generated name is there once created
	Propagation string // of a delete that set one ("Background", "Foreground", "Orphan")
	Err         error  // what the write returned
	Injected    bool   // Err is a FailWrites fault: the write never reached the API server
}

// String is "verb Kind/name".
func (w Write) String() string { return fmt.Sprintf("%s %s/%s", w.Verb, w.Kind, w.Name) }

// Server is a fake API server and the lagging, logging, failing cache in front of it.
type Server struct {
	API   client.WithWatch // the API server
	Cache client.WithWatch // what a reconciler reads and writes through

	t   testing.TB
	cfg config

	mu       sync.Mutex
	snapshot client.WithWatch                 // the frozen picture; nil: reads are current
	frozen   map[schema.GroupVersionKind]bool // kinds read from snapshot
	hidden   map[string]bool                  // kinds the cache does not hold
	writes   []Write
	faults   map[string]error // "verb Kind" -> the error such writes fail with
}

// New is an API server holding the objects of opts, with the cache in front of it.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{t: t, hidden: map[string]bool{}, faults: map[string]error{}}
	for _, o := range opts {
		o(&s.cfg)
	}
	s.API = s.build(s.cfg.objects)
	s.Cache = interceptor.NewClient(s.API, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			r, err := s.reader(c, obj)
			if err != nil {
				return apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(s.kindOf(obj)) + "s"}, key.Name)
			}
			return r.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			r, err := s.reader(c, list)
			if err != nil {
				return meta.SetList(list, nil)
			}
			return r.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if s.cfg.clock != nil {
				obj.SetCreationTimestamp(metav1.NewTime(s.cfg.clock.Now()))
			}
			if obj.GetUID() == "" {
				obj.SetUID(uuid.NewUUID()) // as the API server does: a recreated object is told apart by it
			}
			return s.write("create", "", obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return s.write("update", "", obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return s.write("patch", "", obj, func() error { return c.Patch(ctx, obj, p, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			var propagation string
			if o := (&client.DeleteOptions{}).ApplyOptions(opts); o.PropagationPolicy != nil {
				propagation = string(*o.PropagationPolicy)
			}
			return s.write("delete", propagation, obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return s.write(sub, "", obj, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			return s.write(sub, "", obj, func() error { return c.SubResource(sub).Patch(ctx, obj, p, opts...) })
		},
	})
	return s
}

// build is a fake API server holding objs. It keeps no managedFields (nothing here applies
// server-side): the default tracker's bookkeeping would build a REST mapper of the whole scheme
// on every write, most of a test's time under -race.
func (s *Server) build(objs []client.Object) client.WithWatch {
	s.t.Helper()
	scheme := Scheme()
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjectTracker(tracker).
		WithObjects(objs...).WithStatusSubresource(s.cfg.status...)
	if s.cfg.indexes {
		if err := index.Register(context.Background(), builderIndexer{b}); err != nil {
			s.t.Fatal(err)
		}
	}
	return b.Build()
}

// builderIndexer registers field indexes on a fake client builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

func (s *Server) gvkOf(obj runtime.Object) schema.GroupVersionKind {
	gvk, err := s.API.GroupVersionKindFor(obj)
	if err != nil {
		panic(fmt.Sprintf("fakeapi: %T is not in the scheme: %v", obj, err))
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return gvk
}

func (s *Server) kindOf(obj runtime.Object) string { return s.gvkOf(obj).Kind }

// reader is where the cache reads obj's kind from: the snapshot when the kind is frozen, else
// the API server. An error: the kind is hidden.
func (s *Server) reader(live client.WithWatch, obj runtime.Object) (client.Reader, error) {
	gvk := s.gvkOf(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hidden[gvk.Kind] {
		return nil, fmt.Errorf("%s is hidden", gvk.Kind)
	}
	if s.snapshot != nil && s.frozen[gvk] {
		return s.snapshot, nil
	}
	return live, nil
}

func (s *Server) write(verb, propagation string, obj client.Object, do func() error) error {
	kind := s.kindOf(obj)
	s.mu.Lock()
	fault := s.faults[verb+" "+kind]
	s.mu.Unlock()
	err := fault
	if fault == nil {
		err = do()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, Write{Verb: verb, Kind: kind, Name: obj.GetName(), Propagation: propagation, Err: err, Injected: fault != nil})
	return err
}

// FailWrites makes every write of verb ("create", "update", "patch", "delete", "status") on
// kind through the cache fail with err, without reaching the API server; a nil err lifts it.
func (s *Server) FailWrites(verb, kind string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.faults, verb+" "+kind)
		return
	}
	s.faults[verb+" "+kind] = err
}

// Heal lifts every FailWrites.
func (s *Server) Heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.faults)
}

// Writes are the writes made through the cache since New or the last TakeWrites, in order.
func (s *Server) Writes() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Write(nil), s.writes...)
}

// TakeWrites returns Writes and starts the log afresh.
func (s *Server) TakeWrites() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.writes
	s.writes = nil
	return w
}

// Freeze makes the cache keep showing the objects of the kinds of lists as the API server holds
// them now, whatever is written later, until Thaw; other kinds read through. A later Freeze
// replaces the picture.
func (s *Server) Freeze(lists ...client.ObjectList) {
	s.t.Helper()
	var objs []client.Object
	frozen := map[schema.GroupVersionKind]bool{}
	for _, list := range lists {
		if err := s.API.List(context.Background(), list); err != nil {
			s.t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, o := range items {
			objs = append(objs, o.(client.Object))
		}
		frozen[s.gvkOf(list)] = true
	}
	snap := s.build(objs)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshot, s.frozen = snap, frozen
}

// Thaw makes the cache current again.
func (s *Server) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshot, s.frozen = nil, nil
}

// Hide keeps every object of kind out of the cache, as one not synced yet or outside its label
// selector: a Get finds nothing, a List is empty.
func (s *Server) Hide(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hidden[kind] = true
}

// DrainEvents returns the events rec recorded so far ("Type Reason message") and empties it.
func DrainEvents(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
