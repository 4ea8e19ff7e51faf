package sandbox

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// expiring is a running Sandbox with a volume, due to shut down an hour after the epoch.
func expiring(policy *agentsv1beta1.ShutdownPolicy) *agentsv1beta1.Sandbox {
	w := aSandbox().Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home").ShutdownTime(epoch.Add(time.Hour))
	if policy != nil {
		w = w.ShutdownPolicy(agentsv1alpha1.ShutdownPolicy(*policy))
	}
	return w.Hub()
}

// running brings the Sandbox to Ready before its expiry.
func running(t *testing.T, sb *agentsv1beta1.Sandbox) *rig {
	t.Helper()
	g := newRig(t, []client.Object{sb})
	g.reconcile()
	g.podRunsReady()
	if got := g.reconcile().RequeueAfter; got != time.Hour {
		t.Fatalf("RequeueAfter = %v, want the hour until shutdownTime", got)
	}
	g.wantReady(metav1.ConditionTrue, agentsv1beta1.ReasonReady)
	g.drainEvents()
	return g
}

// At shutdownTime the pod and Service go either way. Retain (the default) keeps the Sandbox and
// its volumes and says so, once; Delete deletes the Sandbox (its PVCs follow by garbage
// collection).
func TestExpiryFollowsTheShutdownPolicy(t *testing.T) {
	retain, del := agentsv1beta1.ShutdownPolicyRetain, agentsv1beta1.ShutdownPolicyDelete
	tests := []struct {
		name        string
		policy      *agentsv1beta1.ShutdownPolicy
		wantSandbox bool
	}{
		{"no policy: Retain", nil, true},
		{"Retain", &retain, true},
		{"Delete", &del, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := running(t, expiring(tt.policy))
			g.clock.Step(time.Hour)
			if res := g.reconcile(); res.RequeueAfter != 0 {
				t.Errorf("RequeueAfter = %v after expiry, want none", res.RequeueAfter)
			}
			if g.pod() != nil || g.service() != nil {
				t.Errorf("pod or Service left after expiry (pod %v, service %v)", g.pod() != nil, g.service() != nil)
			}
			if g.pvc("home-"+testSB) == nil {
				t.Error("expiry deleted the PVC itself, want garbage collection (Delete) or nothing (Retain) to decide")
			}
			if events := g.eventReasons(); len(events) != 1 || events[0] != "Normal "+agentsv1beta1.ReasonExpired {
				t.Errorf("events %v, want one Normal %s", events, agentsv1beta1.ReasonExpired)
			}
			sb := &agentsv1beta1.Sandbox{}
			if exists := g.get(testSB, sb); exists != tt.wantSandbox {
				t.Fatalf("Sandbox exists after expiry: %v, want %v", exists, tt.wantSandbox)
			}
			if !tt.wantSandbox {
				return
			}
			g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonExpired)
			if c := g.condition(agentsv1beta1.SandboxConditionReady); !strings.Contains(c.Message, "shutdownPolicy Delete") {
				t.Errorf("Ready message %q, want it to tell how to have expiry delete the Sandbox", c.Message)
			}
			if st := g.sandbox().Status; st.Replicas != 0 || st.PodIPs != nil || st.Service != "" || st.ServiceFQDN != "" {
				t.Errorf("status %+v, want no replicas, pod IPs nor Service", st)
			}

			// Later passes keep it expired: no pod again, no second event, no write.
			before := len(g.reached())
			g.reconcile()
			if w := g.writesSince(before); len(w) > 0 {
				t.Errorf("a pass over an expired Sandbox wrote %v, want nothing", w)
			}
			if events := g.drainEvents(); len(events) > 0 {
				t.Errorf("a pass over an expired Sandbox sent %v, want nothing", events)
			}
		})
	}
}

// Expiry deletes only the Sandbox's own children.
func TestExpiryLeavesSomeoneElsesPodAndServiceAlone(t *testing.T) {
	theirPod := foreign(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSB}})
	theirSvc := foreign(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSB}})
	g := newRig(t, []client.Object{aSandbox().ShutdownTime(epoch).Hub(), theirPod, theirSvc})
	g.reconcile()
	if g.pod() == nil || g.service() == nil {
		t.Errorf("expiry deleted someone else's pod (%v) or Service (%v)", g.pod() == nil, g.service() == nil)
	}
	g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonExpired)
}

// A failed delete is returned for a retry; under Delete the Sandbox stays until its pod is
// gone, and the retry finishes the work.
func TestExpiryRetriesAFailedDelete(t *testing.T) {
	del := agentsv1beta1.ShutdownPolicyDelete
	g := running(t, expiring(&del))
	g.clock.Step(2 * time.Hour)
	g.refuse("delete", "Pod", errBoom)
	if _, err := g.reconcileErr(); err == nil {
		t.Fatal("Reconcile = nil although the pod could not be deleted, want the error back")
	}
	if !g.get(testSB, &agentsv1beta1.Sandbox{}) || g.pod() == nil {
		t.Fatal("the Sandbox or its pod went although the pod's delete failed")
	}
	g.heal()
	g.reconcile()
	if g.pod() != nil || g.get(testSB, &agentsv1beta1.Sandbox{}) {
		t.Error("after the retry the pod or the Sandbox is still there")
	}
}
