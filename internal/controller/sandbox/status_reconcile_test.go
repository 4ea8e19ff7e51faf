package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The status follows the pod through its life: every not-ready state with its own reason,
// replicas and pod IPs while a pod lives, and Finished once it ran to completion.
func TestStatusFollowsThePod(t *testing.T) {
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	tests := []struct {
		name         string
		pod          func(*corev1.PodStatus)
		wantReady    metav1.ConditionStatus
		wantReason   string
		wantIPs      []string
		wantFinished string // the Finished condition's reason, "" when absent
	}{
		{name: "unschedulable", pod: func(s *corev1.PodStatus) {
			s.Phase = corev1.PodPending
			s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}
		}, wantReady: metav1.ConditionFalse, wantReason: agentsv1beta1.ReasonPodPending},
		{name: "running, not ready", pod: func(s *corev1.PodStatus) {
			s.Phase, s.PodIPs = corev1.PodRunning, []corev1.PodIP{{IP: podIP}}
		}, wantReady: metav1.ConditionFalse, wantReason: agentsv1beta1.ReasonPodNotReady, wantIPs: []string{podIP}},
		{name: "ready without an IP", pod: func(s *corev1.PodStatus) {
			s.Phase, s.Conditions = corev1.PodRunning, []corev1.PodCondition{ready}
		}, wantReady: metav1.ConditionFalse, wantReason: agentsv1beta1.ReasonPodNoIP},
		{name: "ready, dual stack", pod: func(s *corev1.PodStatus) {
			s.Phase, s.Conditions = corev1.PodRunning, []corev1.PodCondition{ready}
			s.PodIPs = []corev1.PodIP{{IP: podIP}, {IP: "fd00::7"}}
		}, wantReady: metav1.ConditionTrue, wantReason: agentsv1beta1.ReasonReady, wantIPs: []string{podIP, "fd00::7"}},
		{name: "succeeded", pod: func(s *corev1.PodStatus) { s.Phase = corev1.PodSucceeded },
			wantReady: metav1.ConditionFalse, wantReason: agentsv1beta1.ReasonPodSucceeded, wantFinished: agentsv1beta1.ReasonPodSucceeded},
		{name: "failed", pod: func(s *corev1.PodStatus) { s.Phase, s.Reason = corev1.PodFailed, "Evicted" },
			wantReady: metav1.ConditionFalse, wantReason: agentsv1beta1.ReasonPodFailed, wantFinished: agentsv1beta1.ReasonPodFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, []client.Object{aSandbox().Generation(3).Hub()})
			g.reconcile()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: testSB}}
			g.updateStatus(pod, func() { tt.pod(&pod.Status) })
			g.reconcile()

			g.wantReady(tt.wantReady, tt.wantReason)
			st := g.sandbox().Status
			if d := cmp.Diff(tt.wantIPs, st.PodIPs); d != "" {
				t.Errorf("status.podIPs (-want +got):\n%s", d)
			}
			if st.Replicas != 1 {
				t.Errorf("status.replicas = %d, want 1 while the pod exists", st.Replicas)
			}
			if c := g.condition(agentsv1beta1.SandboxConditionReady); c.ObservedGeneration != 3 {
				t.Errorf("Ready observedGeneration = %d, want the Sandbox's generation 3", c.ObservedGeneration)
			}
			finished := g.condition(agentsv1beta1.SandboxConditionFinished)
			switch {
			case tt.wantFinished == "" && finished != nil:
				t.Errorf("Finished %+v, want none", finished)
			case tt.wantFinished != "" && (finished == nil || finished.Status != metav1.ConditionTrue || finished.Reason != tt.wantFinished):
				t.Errorf("Finished %+v, want True/%s", finished, tt.wantFinished)
			}
		})
	}
}

// A condition keeps its lastTransitionTime while its status stays, whatever its reason: a
// client measuring how long a Sandbox has not been ready must not be reset by every step.
func TestReadyTransitionTimeMovesOnlyWithItsStatus(t *testing.T) {
	since := metav1.NewTime(epoch.Add(-time.Hour))
	sb := aSandbox().Condition(metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse,
		Reason: agentsv1beta1.ReasonPodCreating, LastTransitionTime: since}).Hub()
	g := newRig(t, []client.Object{sb})
	g.reconcile()
	c := g.condition(agentsv1beta1.SandboxConditionReady)
	if c.Reason != agentsv1beta1.ReasonPodPending || !c.LastTransitionTime.Equal(&since) {
		t.Errorf("Ready %s since %v, want PodPending still since %v", c.Reason, c.LastTransitionTime, since)
	}
	g.podRunsReady()
	g.reconcile()
	if c := g.condition(agentsv1beta1.SandboxConditionReady); c.LastTransitionTime.Equal(&since) {
		t.Errorf("Ready turned True but kept lastTransitionTime %v", since)
	}
}

// A reconcile on a cache that does not show the status written a moment ago computes it again
// and does not write it twice; a status that did change is written all the same.
func TestAStatusWrittenMomentsAgoIsNotWrittenAgain(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Hub()})
	g.freeze()
	g.reconcile()
	g.reconcile()
	if n := g.count("status", "Sandbox"); n != 1 {
		t.Errorf("status written %d times while the cache lagged, want 1", n)
	}
	g.podRunsReady()
	g.reconcile()
	if n := g.count("status", "Sandbox"); n != 2 {
		t.Errorf("status written %d times, want the change to Ready written", n)
	}
	g.wantReady(metav1.ConditionTrue, agentsv1beta1.ReasonReady)
}

// A warm pool member is read by nobody before it is Ready: its first status waits for the
// scheduler to look at its pod (one write fewer per member), later states are written.
func TestAWarmMembersFirstStatusWaitsForTheScheduler(t *testing.T) {
	pool := testwrap.MakeWarmPool(testNS, "pool").UID("pool-uid").Hub()
	g := newRig(t, []client.Object{aSandbox().ControlledBy(pool, extv1beta1.GroupVersion.WithKind("SandboxWarmPool")).Hub()})
	g.reconcile()
	if n := g.count("status", "Sandbox"); n != 0 {
		t.Errorf("status written %d times before the scheduler saw the pod, want none", n)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: testSB}}
	g.updateStatus(pod, func() {
		pod.Status.Phase = corev1.PodPending
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	})
	g.reconcile()
	g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonPodPending)
}
