package sandbox

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// The Reconcile tests drive one Reconciler on controller-runtime's fake client. The rig stands
// between the two, the way a manager's cache and the API server would: the reconciler reads
// and writes through rig.cache, whose reads can be made stale (hide a kind, freeze the Sandbox
// at an older version) and whose writes can be refused (an API error, a conflict); its
// apiReader, like the manager's, reads the API itself (rig.api). Every write that reaches the
// API is logged, so a test can say how many creates a pass made.

const (
	testNS  = "team-a"
	testSB  = "s1"
	testUID = types.UID("sb-uid-1")
	podIP   = "10.0.0.7"
)

// epoch is the fake clock's start.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var sandboxGVK = agentsv1alpha1.GroupVersion.WithKind("Sandbox")

// aSandbox is the Sandbox most tests start from: testNS/testSB with a UID, as the API server
// would have given it, and one container serving port 8888.
func aSandbox() *testwrap.SandboxWrapper {
	return testwrap.MakeSandbox(testNS, testSB).UID(testUID).Generation(1)
}

// call is one write that reached the API.
type call struct {
	verb, kind, name string
	err              error
}

// fault makes the API refuse matching writes with err.
type fault struct {
	verb, kind string // "create", "update", "patch", "delete", "status"; a kind such as "Pod"
	err        error
}

type rig struct {
	t      *testing.T
	name   string           // of the Sandbox under test: the first in the objects, else testSB
	api    client.WithWatch // the API server's state
	r      *Reconciler
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder

	calls  []call
	faults []fault
	// hidden kinds are missing from the cache (not synced yet, or outside its label selector).
	hidden map[string]bool
	// frozen, when set, is the Sandbox the cache keeps returning.
	frozen *agentsv1alpha1.Sandbox
}

type rigOption func(*Options)

func withActivity(a ActivitySource) rigOption { return func(o *Options) { o.Activity = a } }

// testScheme is built once: building it is a quarter of the tests' time under -race, and nothing
// changes it after.
var testScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1alpha1.AddToScheme, extv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // registering generated types cannot fail
		}
	}
	return s
})

func newRig(t *testing.T, objs []client.Object, opts ...rigOption) *rig {
	t.Helper()
	g := &rig{t: t, name: testSB, clock: clocktesting.NewFakeClock(epoch), events: record.NewFakeRecorder(100), hidden: map[string]bool{}}
	for _, o := range objs {
		if sb, ok := o.(*agentsv1alpha1.Sandbox); ok {
			g.name = sb.Name
			break
		}
	}
	scheme := testScheme()
	// A plain tracker: the default one keeps managedFields, which nothing here reads, and builds
	// a REST mapper of the whole scheme on every write (most of a test's time under -race).
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	g.api = fake.NewClientBuilder().WithScheme(scheme).WithObjectTracker(tracker).WithObjects(objs...).
		WithStatusSubresource(&agentsv1alpha1.Sandbox{}).Build()
	cache := interceptor.NewClient(g.api, interceptor.Funcs{
		Get: g.cachedGet,
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.CreateOption) error {
			return g.write("create", obj, func() error { return c.Create(ctx, obj, o...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.UpdateOption) error {
			return g.write("update", obj, func() error { return c.Update(ctx, obj, o...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, o ...client.PatchOption) error {
			return g.write("patch", obj, func() error { return c.Patch(ctx, obj, p, o...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.DeleteOption) error {
			return g.write("delete", obj, func() error { return c.Delete(ctx, obj, o...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
			return g.write(sub, obj, func() error { return c.SubResource(sub).Patch(ctx, obj, p, o...) })
		},
	})
	o := Options{Recorder: g.events, Clock: g.clock}
	for _, opt := range opts {
		opt(&o)
	}
	g.r = New(cache, g.api, o)
	return g
}

func kindOf(obj runtime.Object) string { return reflect.TypeOf(obj).Elem().Name() }

func (g *rig) cachedGet(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, o ...client.GetOption) error {
	kind := kindOf(obj)
	if g.hidden[kind] {
		return apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(kind) + "s"}, key.Name)
	}
	if sb, ok := obj.(*agentsv1alpha1.Sandbox); ok && g.frozen != nil && key == client.ObjectKeyFromObject(g.frozen) {
		g.frozen.DeepCopyInto(sb)
		return nil
	}
	return c.Get(ctx, key, obj, o...)
}

func (g *rig) write(verb string, obj client.Object, do func() error) error {
	for _, f := range g.faults {
		if f.verb == verb && f.kind == kindOf(obj) {
			return f.err
		}
	}
	err := do()
	g.calls = append(g.calls, call{verb: verb, kind: kindOf(obj), name: obj.GetName(), err: err})
	return err
}

// refuse makes the API answer every verb write of kind with err until heal.
func (g *rig) refuse(verb, kind string, err error) {
	g.faults = append(g.faults, fault{verb, kind, err})
}
func (g *rig) heal() { g.faults = nil }

// hide keeps every object of kind out of the cache.
func (g *rig) hide(kind string) { g.hidden[kind] = true }

// freeze makes the cache keep returning the Sandbox as it is now, whatever is written later.
func (g *rig) freeze() { g.frozen = g.sandbox() }

// reconcile runs one pass and fails the test on an error.
func (g *rig) reconcile() ctrl.Result {
	g.t.Helper()
	res, err := g.reconcileErr()
	if err != nil {
		g.t.Fatalf("Reconcile: %v", err)
	}
	return res
}

func (g *rig) reconcileErr() (ctrl.Result, error) {
	return g.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: g.name}})
}

// count is how many verb writes of kind reached the API (refused by it or not).
func (g *rig) count(verb, kind string) int {
	n := 0
	for _, c := range g.calls {
		if c.verb == verb && c.kind == kind {
			n++
		}
	}
	return n
}

// writesSince lists the writes that reached the API after the first n.
func (g *rig) writesSince(n int) []string {
	var out []string
	for _, c := range g.calls[n:] {
		out = append(out, fmt.Sprintf("%s %s %s", c.verb, c.kind, c.name))
	}
	return out
}

// get reads obj's namespace/name from the API into obj; false when there is none.
func (g *rig) get(name string, obj client.Object) bool {
	g.t.Helper()
	err := g.api.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		g.t.Fatal(err)
	}
	return true
}

func (g *rig) sandbox() *agentsv1alpha1.Sandbox {
	g.t.Helper()
	sb := &agentsv1alpha1.Sandbox{}
	if !g.get(g.name, sb) {
		g.t.Fatalf("Sandbox %s is gone", g.name)
	}
	return sb
}

func (g *rig) pod() *corev1.Pod {
	pod := &corev1.Pod{}
	if !g.get(g.name, pod) {
		return nil
	}
	return pod
}

func (g *rig) service() *corev1.Service {
	svc := &corev1.Service{}
	if !g.get(g.name, svc) {
		return nil
	}
	return svc
}

func (g *rig) policy() *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{}
	if !g.get(EgressPolicyName(g.name), np) {
		return nil
	}
	return np
}

func (g *rig) pvc(name string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{}
	if !g.get(name, pvc) {
		return nil
	}
	return pvc
}

// update writes the API's object named like the Sandbox after change, as another client would.
func (g *rig) update(obj client.Object, change func()) {
	g.t.Helper()
	if !g.get(obj.GetName(), obj) {
		g.t.Fatalf("%s %s does not exist", kindOf(obj), obj.GetName())
	}
	change()
	if err := g.api.Update(context.Background(), obj); err != nil {
		g.t.Fatal(err)
	}
}

// updateStatus writes the status of the API's object named like the Sandbox after change.
func (g *rig) updateStatus(obj client.Object, change func()) {
	g.t.Helper()
	if !g.get(obj.GetName(), obj) {
		g.t.Fatalf("%s %s does not exist", kindOf(obj), obj.GetName())
	}
	change()
	if err := g.api.Status().Update(context.Background(), obj); err != nil {
		g.t.Fatal(err)
	}
}

// podRunsReady reports the pod Running, Ready and with an IP, as the kubelet would.
func (g *rig) podRunsReady() {
	g.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
	g.updateStatus(pod, func() {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIPs = []corev1.PodIP{{IP: podIP}}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
}

// events drains the events recorded so far, each "Type Reason message".
func (g *rig) drainEvents() []string {
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

// eventReasons drains the events and returns "Type Reason" of each.
func (g *rig) eventReasons() []string {
	var out []string
	for _, e := range g.drainEvents() {
		f := strings.Fields(e)
		out = append(out, f[0]+" "+f[1])
	}
	return out
}

// condition is the Sandbox's condition of type in the API, nil when absent.
func (g *rig) condition(typ string) *metav1.Condition {
	return meta.FindStatusCondition(g.sandbox().Status.Conditions, typ)
}

// wantReady fails unless the Sandbox's Ready condition in the API has status and reason.
func (g *rig) wantReady(status metav1.ConditionStatus, reason string) {
	g.t.Helper()
	c := g.condition(agentsv1alpha1.SandboxConditionReady)
	if c == nil {
		g.t.Fatalf("Sandbox has no Ready condition, want %s/%s", status, reason)
	}
	if c.Status != status || c.Reason != reason {
		g.t.Errorf("Ready = %s/%s (%q), want %s/%s", c.Status, c.Reason, c.Message, status, reason)
	}
}

// ownedBy fails unless obj's controller is the test Sandbox.
func ownedBy(t *testing.T, obj client.Object) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Sandbox" || ref.Name != testSB || ref.UID != testUID {
		t.Errorf("%s %s is controlled by %+v, want Sandbox %s (uid %s)", kindOf(obj), obj.GetName(), ref, testSB, testUID)
	}
}

// foreign makes obj someone else's: controlled by another Sandbox of the same name.
func foreign[T client.Object](obj T) T {
	other := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: testSB, UID: "someone-else"}}
	obj.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(other, sandboxGVK)})
	return obj
}

// fakeActivity is what sandboxd reports through the router.
type fakeActivity struct {
	act   wire.Activity
	err   error
	asked int
}

func (f *fakeActivity) Activity(context.Context, string, string) (wire.Activity, error) {
	f.asked++
	return f.act, f.err
}

var errBoom = apierrors.NewInternalError(fmt.Errorf("etcd is unhappy"))

func conflict(kind string) error {
	return apierrors.NewConflict(schema.GroupResource{Resource: strings.ToLower(kind) + "s"}, testSB, fmt.Errorf("the object has been modified"))
}

func notFound(resource string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, testSB)
}
