package sandbox

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// One pass over a new Sandbox makes all its children, each controlled by it, the NetworkPolicy
// before the pod (a pod never runs unprotected), and reports where it stands.
func TestReconcileMakesEveryChildOfANewSandbox(t *testing.T) {
	sb := aSandbox().Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home/user").Hub()
	g := newRig(t, []client.Object{sb})

	if res := g.reconcile(); res != (ctrl.Result{}) {
		t.Errorf("Reconcile = %+v, want no requeue (the pod's events bring the next pass)", res)
	}

	pvc, svc, np, pod := g.pvc(PVCName("home", testSB)), g.service(), g.policy(), g.pod()
	for _, child := range []struct {
		kind   string
		obj    client.Object
		exists bool
	}{{"PersistentVolumeClaim", pvc, pvc != nil}, {"Service", svc, svc != nil}, {"NetworkPolicy", np, np != nil}, {"Pod", pod, pod != nil}} {
		if !child.exists {
			t.Errorf("no %s was created", child.kind)
			continue
		}
		ownedBy(t, child.obj)
	}
	if t.Failed() {
		t.FailNow()
	}
	creates := g.writesSince(0)
	policyAt, podAt := slices.Index(creates, "create NetworkPolicy "+testSB), slices.Index(creates, "create Pod "+testSB)
	if policyAt < 0 || podAt < policyAt {
		t.Errorf("writes %v: want the NetworkPolicy created before the pod", creates)
	}

	// Replicas counts the pod from its creation; the conditions are checked below.
	st := g.sandbox().Status
	got := agentsv1beta1.SandboxStatus{Service: st.Service, ServiceFQDN: st.ServiceFQDN, LabelSelector: st.LabelSelector, Replicas: st.Replicas}
	want := agentsv1beta1.SandboxStatus{
		Service: testSB, ServiceFQDN: "s1.team-a.svc.cluster.local", LabelSelector: Selector(testSB), Replicas: 1,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("status (-want +got):\n%s", d)
	}
	g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonPodPending)
}

// A Sandbox that has everything it needs costs the API nothing on the next pass.
func TestReconcileOfASteadySandboxWritesNothing(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home").Hub()})
	g.reconcile()
	g.podRunsReady()
	g.reconcile()
	g.wantReady(metav1.ConditionTrue, agentsv1beta1.ReasonReady)

	before := len(g.reached())
	g.reconcile()
	if w := g.writesSince(before); len(w) > 0 {
		t.Errorf("a pass over a steady Sandbox wrote %v, want no write", w)
	}
}

func TestReconcileOfAGoneOrDeletingSandboxWritesNothing(t *testing.T) {
	tests := []struct {
		name string
		objs []client.Object
	}{
		{"no such Sandbox", nil},
		{"Sandbox being deleted: its children go through garbage collection",
			[]client.Object{aSandbox().Deleting(epoch).Finalizers("example.com/hold").Hub()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, tt.objs)
			if res := g.reconcile(); res != (ctrl.Result{}) {
				t.Errorf("Reconcile = %+v, want no requeue", res)
			}
			if w := g.writesSince(0); len(w) > 0 {
				t.Errorf("wrote %v, want nothing", w)
			}
		})
	}
}

// A namespace being deleted refuses every create and takes the Sandbox with it: that is no
// error to retry, and no status to write.
func TestReconcileInATerminatingNamespaceIsNoError(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Hub()})
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: "namespace team-a is being terminated",
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}},
	}}
	for _, kind := range []string{"Service", "NetworkPolicy", "Pod"} {
		g.refuse("create", kind, terminating)
	}
	if _, err := g.reconcileErr(); err != nil {
		t.Errorf("Reconcile = %v, want no error", err)
	}
	if n := g.count("status", "Sandbox"); n != 0 {
		t.Errorf("status written %d times, want none", n)
	}
}

// An API error is returned (the workqueue retries with backoff) and shown on the Sandbox, no
// child after the failed one is made (above all no pod without its NetworkPolicy), and the next
// pass, with the API well again, finishes the work without making anything twice.
func TestReconcileAfterAnAPIErrorRecoversWithoutDuplicates(t *testing.T) {
	tests := []struct {
		name, verb, kind string
		wantNoPod        bool
		wantErrorStatus  bool
	}{
		{name: "PVC create fails", verb: "create", kind: "PersistentVolumeClaim", wantNoPod: true, wantErrorStatus: true},
		{name: "Service create fails", verb: "create", kind: "Service", wantNoPod: true, wantErrorStatus: true},
		{name: "NetworkPolicy create fails", verb: "create", kind: "NetworkPolicy", wantNoPod: true, wantErrorStatus: true},
		{name: "Pod create fails", verb: "create", kind: "Pod", wantNoPod: true, wantErrorStatus: true},
		{name: "status write fails", verb: "status", kind: "Sandbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, []client.Object{aSandbox().Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home").Hub()})
			g.refuse(tt.verb, tt.kind, errBoom)
			if _, err := g.reconcileErr(); !apierrors.IsInternalError(err) {
				t.Fatalf("Reconcile = %v, want the API's error back for a retry", err)
			}
			if tt.wantNoPod && g.pod() != nil {
				t.Errorf("a pod was created although an earlier step failed")
			}
			if tt.wantErrorStatus {
				g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonReconcilerError)
			}

			g.heal()
			g.reconcile()
			for _, kind := range []string{"PersistentVolumeClaim", "Service", "NetworkPolicy", "Pod"} {
				if n := g.count("create", kind); n != 1 {
					t.Errorf("%s created %d times over both passes, want 1", kind, n)
				}
			}
			g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonPodPending)
		})
	}
}

// Without an expiry or idle timeout nothing calls for a timed requeue; with a shutdownTime the
// pass comes back exactly when it is due, not by polling.
func TestReconcileRequeuesAtTheShutdownTime(t *testing.T) {
	tests := []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want time.Duration
	}{
		{"no shutdownTime", aSandbox().Hub(), 0},
		{"shutdown in 90 min", aSandbox().ShutdownTime(epoch.Add(90 * time.Minute)).Hub(), 90 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, []client.Object{tt.sb})
			if got := g.reconcile().RequeueAfter; got != tt.want {
				t.Errorf("RequeueAfter = %v, want %v", got, tt.want)
			}
		})
	}
}
