package sandbox

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap/fakeapi"
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

var sandboxGVK = agentsv1beta1.GroupVersion.WithKind("Sandbox")

// aSandbox is the Sandbox most tests start from: testNS/testSB with a UID, as the API server
// would have given it, and one container serving port 8888.
func aSandbox() *testwrap.SandboxWrapper {
	return testwrap.MakeSandbox(testNS, testSB).UID(testUID).Generation(1)
}

type rig struct {
	t      *testing.T
	name   string           // of the Sandbox under test: the first in the objects, else testSB
	fake   *fakeapi.Server  // the API server and the cache before it
	api    client.WithWatch // the API server's state
	r      *Reconciler
	clock  *clocktesting.FakeClock
	events *record.FakeRecorder
}

type rigOption func(*Options)

func withActivity(a ActivitySource) rigOption { return func(o *Options) { o.Activity = a } }

func newRig(t *testing.T, objs []client.Object, opts ...rigOption) *rig {
	t.Helper()
	g := &rig{t: t, name: testSB, clock: clocktesting.NewFakeClock(epoch), events: record.NewFakeRecorder(100)}
	for _, o := range objs {
		if sb, ok := o.(*agentsv1beta1.Sandbox); ok {
			g.name = sb.Name
			break
		}
	}
	g.fake = fakeapi.New(t, fakeapi.WithObjects(objs...), fakeapi.WithStatusSubresource(&agentsv1beta1.Sandbox{}))
	g.api = g.fake.API
	o := Options{Recorder: g.events, Clock: g.clock}
	for _, opt := range opts {
		opt(&o)
	}
	g.r = New(g.fake.Cache, g.api, o)
	return g
}

func kindOf(obj runtime.Object) string { return reflect.TypeOf(obj).Elem().Name() }

// refuse makes the API answer every verb write of kind with err until heal.
func (g *rig) refuse(verb, kind string, err error) { g.fake.FailWrites(verb, kind, err) }
func (g *rig) heal()                               { g.fake.Heal() }

// hide keeps every object of kind out of the cache.
func (g *rig) hide(kind string) { g.fake.Hide(kind) }

// freeze makes the cache keep returning the Sandboxes as they are now, whatever is written later.
func (g *rig) freeze() { g.fake.Freeze(&agentsv1beta1.SandboxList{}) }

// reached lists the writes that reached the API (refused by it or not).
func (g *rig) reached() []fakeapi.Write {
	var out []fakeapi.Write
	for _, w := range g.fake.Writes() {
		if !w.Injected {
			out = append(out, w)
		}
	}
	return out
}

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
	for _, c := range g.reached() {
		if c.Verb == verb && c.Kind == kind {
			n++
		}
	}
	return n
}

// writesSince lists the writes that reached the API after the first n.
func (g *rig) writesSince(n int) []string {
	var out []string
	for _, c := range g.reached()[n:] {
		out = append(out, fmt.Sprintf("%s %s %s", c.Verb, c.Kind, c.Name))
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

func (g *rig) sandbox() *agentsv1beta1.Sandbox {
	g.t.Helper()
	sb := &agentsv1beta1.Sandbox{}
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

// drainEvents drains the events recorded so far, each "Type Reason message".
func (g *rig) drainEvents() []string { return fakeapi.DrainEvents(g.events) }

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
	c := g.condition(agentsv1beta1.SandboxConditionReady)
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
	other := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: testSB, UID: "someone-else"}}
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
