package sandbox

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

func TestWarmMemberStatusWaitsForTheScheduler(t *testing.T) {
	poolOwner := metav1.OwnerReference{APIVersion: "extensions.agents.x-k8s.io/v1alpha1", Kind: "SandboxWarmPool",
		Name: "pool", UID: "p1", Controller: ptr.To(true)}
	claimOwner := poolOwner
	claimOwner.Kind, claimOwner.Name = "SandboxClaim", "claim"
	sandboxOf := func(owner *metav1.OwnerReference, ready *metav1.Condition) *agentsv1beta1.Sandbox {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool-x"}}
		if owner != nil {
			sb.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		if ready != nil {
			sb.Status.Conditions = []metav1.Condition{*ready}
		}
		return sb
	}
	pending := &metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonPodPending}
	failedRead := &metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonReconcilerError}
	newPod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	scheduled := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}

	tests := []struct {
		name     string
		original *agentsv1beta1.Sandbox
		updated  *agentsv1beta1.Sandbox
		pod      *corev1.Pod
		want     bool
	}{
		{name: "a new member whose pod no scheduler has seen waits",
			original: sandboxOf(&poolOwner, nil), updated: sandboxOf(&poolOwner, pending), pod: newPod, want: true},
		{name: "a scheduled pod's state is written",
			original: sandboxOf(&poolOwner, nil), updated: sandboxOf(&poolOwner, pending), pod: scheduled},
		{name: "a member that already has a status is kept current",
			original: sandboxOf(&poolOwner, pending), updated: sandboxOf(&poolOwner, pending), pod: newPod},
		{name: "an error is written at once",
			original: sandboxOf(&poolOwner, nil), updated: sandboxOf(&poolOwner, failedRead), pod: newPod},
		{name: "a claimed Sandbox's status is written (someone waits for it)",
			original: sandboxOf(&claimOwner, nil), updated: sandboxOf(&claimOwner, pending), pod: newPod},
		{name: "a Sandbox of no pool is written",
			original: sandboxOf(nil, nil), updated: sandboxOf(nil, pending), pod: newPod},
		{name: "no pod, nothing to wait for",
			original: sandboxOf(&poolOwner, nil), updated: sandboxOf(&poolOwner, pending)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := warmMemberPodUnseen(tt.original, tt.updated, observed{pod: tt.pod}); got != tt.want {
				t.Errorf("warmMemberPodUnseen = %v, want %v", got, tt.want)
			}
		})
	}
}

// A status computed again from a stale copy differs from the one written only in its
// conditions' transition times; any other difference is a change to write.
func TestSameStatusIgnoresOnlyTransitionTimes(t *testing.T) {
	ready := func(status metav1.ConditionStatus, at time.Time, ips ...string) agentsv1beta1.SandboxStatus {
		return agentsv1beta1.SandboxStatus{PodIPs: ips, Conditions: []metav1.Condition{{
			Type: agentsv1beta1.SandboxConditionReady, Status: status, Reason: "R", LastTransitionTime: metav1.NewTime(at)}}}
	}
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		a, b agentsv1beta1.SandboxStatus
		want bool
	}{
		{"same, stamped a second apart", ready(metav1.ConditionTrue, t0, "10.0.0.1"), ready(metav1.ConditionTrue, t0.Add(time.Second), "10.0.0.1"), true},
		{"another condition status", ready(metav1.ConditionTrue, t0, "10.0.0.1"), ready(metav1.ConditionFalse, t0, "10.0.0.1"), false},
		{"another pod IP", ready(metav1.ConditionTrue, t0, "10.0.0.1"), ready(metav1.ConditionTrue, t0, "10.0.0.2"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameStatus(tc.a, tc.b); got != tc.want {
				t.Errorf("sameStatus = %v, want %v", got, tc.want)
			}
			if tc.a.Conditions[0].LastTransitionTime.IsZero() {
				t.Error("sameStatus changed its argument's transition time")
			}
		})
	}
}

func TestWaitingDetailNamesTheKubeletsReason(t *testing.T) {
	waiting := func(reason, message string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "ok", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}},
		}}}
	}
	long := strings.Repeat("é", maxWaitingMessage+10)
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"reason and message", waiting("CreateContainerConfigError", "container has runAsNonRoot and image will run as root"),
			" (container app: CreateContainerConfigError: container has runAsNonRoot and image will run as root)"},
		{"a reason alone", waiting("ContainerCreating", ""), " (container app: ContainerCreating)"},
		{"a long message is cut", waiting("ErrImagePull", long),
			" (container app: ErrImagePull: " + strings.Repeat("é", maxWaitingMessage) + "…)"},
		{"nothing waits", &corev1.Pod{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := waitingDetail(tt.pod); got != tt.want {
				t.Errorf("waitingDetail = %q, want %q", got, tt.want)
			}
		})
	}
}
