package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// setStatus fills sb.Status from what this reconcile observed. Conditions keep their
// lastTransitionTime while their status does not change.
func setStatus(sb *agentsv1beta1.Sandbox, obs observed, reconcileErr error, clusterDomain string) {
	st := &sb.Status
	st.LabelSelector = Selector(sb.Name)
	live := obs.pod != nil && obs.pod.DeletionTimestamp.IsZero()
	st.Replicas = 0
	st.PodIPs = nil
	if live {
		st.Replicas = 1
		st.PodIPs = podIPs(obs.pod)
	}
	st.Service, st.ServiceFQDN = "", ""
	if obs.service != nil {
		st.Service = obs.service.Name
		st.ServiceFQDN = ServiceFQDN(obs.service.Name, sb.Namespace, clusterDomain)
	}

	ready := readyCondition(sb, obs, reconcileErr)
	if obs.serviceProblem != "" {
		// The pod is reachable by IP either way; say why serviceFQDN is empty.
		ready.Message += "; " + obs.serviceProblem
	}
	ready.Type = agentsv1beta1.SandboxConditionReady
	ready.ObservedGeneration = sb.Generation
	meta.SetStatusCondition(&st.Conditions, ready)

	setEgressCondition(sb, obs.egress)
	if c := idlePauseCondition(sb); c != nil {
		meta.SetStatusCondition(&st.Conditions, *c)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, agentsv1beta1.SandboxConditionIdlePause)
	}

	if finished, ok := finishedCondition(obs.pod); ok {
		finished.ObservedGeneration = sb.Generation
		meta.SetStatusCondition(&st.Conditions, finished)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, agentsv1beta1.SandboxConditionFinished)
	}
}

// readyCondition gives every not-ready state its own reason, so a client can tell "wait"
// (PodPending, PodNotReady, PodNoIP) from "act" (SandboxPaused, PodFailed, PodNotOwned, error).
func readyCondition(sb *agentsv1beta1.Sandbox, obs observed, reconcileErr error) metav1.Condition {
	notReady := func(reason, format string, args ...any) metav1.Condition {
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	pod := obs.pod
	switch {
	case reconcileErr != nil:
		return notReady(agentsv1beta1.ReasonReconcilerError, "Error seen: %v", reconcileErr)
	case obs.podNotOwned:
		return notReady(agentsv1beta1.ReasonPodNotOwned, "A pod named %q exists and is not controlled by this sandbox; delete or rename it", sb.Name)
	case sb.DesiredReplicas() == agentsv1beta1.PausedReplicas && idlePaused(sb) != "":
		return notReady(agentsv1beta1.ReasonIdlePaused, "Sandbox paused itself at %s for being idle; volumes and service are kept%s",
			idlePaused(sb), wakeHint(sb))
	case sb.DesiredReplicas() == agentsv1beta1.PausedReplicas && pod != nil:
		return notReady(agentsv1beta1.ReasonPaused, "Sandbox is paused (replicas: 0); its pod is terminating")
	case sb.DesiredReplicas() == agentsv1beta1.PausedReplicas:
		return notReady(agentsv1beta1.ReasonPaused, "Sandbox is paused (replicas: 0); volumes and service are kept%s", wakeHintIfWakes(sb))
	case pod == nil && obs.egress.blocksPod():
		return notReady(obs.egress.reason, "%s", obs.egress.message)
	case pod == nil:
		return notReady(agentsv1beta1.ReasonPodCreating, "Pod is being created")
	case !pod.DeletionTimestamp.IsZero():
		return notReady(agentsv1beta1.ReasonPodTerminating, "Previous pod is terminating; a new one follows once it is gone")
	case pod.Status.Phase == corev1.PodFailed:
		return notReady(agentsv1beta1.ReasonPodFailed, "Pod failed%s", detail(pod.Status.Reason, pod.Status.Message))
	case pod.Status.Phase == corev1.PodSucceeded:
		return notReady(agentsv1beta1.ReasonPodSucceeded, "Pod ran to completion")
	case pod.Status.Phase != corev1.PodRunning:
		return notReady(agentsv1beta1.ReasonPodPending, "Pod is pending%s", pendingDetail(pod))
	case !podReady(pod):
		return notReady(agentsv1beta1.ReasonPodNotReady, "Pod is running but not ready%s", notReadyDetail(pod))
	case len(podIPs(pod)) == 0:
		return notReady(agentsv1beta1.ReasonPodNoIP, "Pod is ready but has no IP yet")
	}
	return metav1.Condition{Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonReady, Message: "Pod is ready"}
}

func finishedCondition(pod *corev1.Pod) (metav1.Condition, bool) {
	if pod == nil {
		return metav1.Condition{}, false
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return metav1.Condition{Type: agentsv1beta1.SandboxConditionFinished, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonPodSucceeded, Message: "Pod ran to completion"}, true
	case corev1.PodFailed:
		return metav1.Condition{Type: agentsv1beta1.SandboxConditionFinished, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonPodFailed, Message: "Pod failed" + detail(pod.Status.Reason, pod.Status.Message)}, true
	}
	return metav1.Condition{}, false
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podIPs(pod *corev1.Pod) []string {
	ips := make([]string, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = append(ips, pod.Status.PodIP)
	}
	if len(ips) == 0 {
		return nil
	}
	return ips
}

func pendingDetail(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return detail(c.Reason, c.Message)
		}
	}
	if pod.Spec.NodeName == "" {
		return ": not scheduled yet"
	}
	return waitingDetail(pod)
}

func notReadyDetail(pod *corev1.Pod) string {
	var notReady []string
	for _, cs := range pod.Status.ContainerStatuses {
		if !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
	}
	sort.Strings(notReady)
	if len(notReady) == 0 {
		return ""
	}
	return ": containers not ready: " + strings.Join(notReady, ", ") + waitingDetail(pod)
}

// waitingDetail names the first waiting container's reason and the kubelet's message, which
// says what to change ("container has runAsNonRoot and image will run as root", a failed pull).
func waitingDetail(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			if msg := truncateRunes(w.Message, maxWaitingMessage); msg != "" {
				return fmt.Sprintf(" (container %s: %s: %s)", cs.Name, w.Reason, msg)
			}
			return fmt.Sprintf(" (container %s: %s)", cs.Name, w.Reason)
		}
	}
	return ""
}

// maxWaitingMessage bounds the kubelet's message in the condition (pull errors can be long).
const maxWaitingMessage = 256

func truncateRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func detail(reason, message string) string {
	switch {
	case reason != "" && message != "":
		return fmt.Sprintf(": %s: %s", reason, message)
	case reason != "":
		return ": " + reason
	case message != "":
		return ": " + message
	}
	return ""
}

// writeStatus writes the status subresource only when it changed. This controller is the sole
// writer of Sandbox status, so a merge patch without a resourceVersion is safe and spares
// conflicts.
func (r *Reconciler) writeStatus(ctx context.Context, original, sb *agentsv1beta1.Sandbox, obs observed) error {
	key := client.ObjectKeyFromObject(sb)
	if equality.Semantic.DeepEqual(original.Status, sb.Status) {
		r.writtenStatus.Observed(key, sb.UID) // nothing to write: what we wrote is seen or superseded
		return nil
	}
	if warmMemberPodUnseen(original, sb, obs) {
		return nil
	}
	if last, ok := r.writtenStatus.Get(key, sb.UID); ok {
		switch {
		case sameStatus(last, original.Status):
			r.writtenStatus.Observed(key, sb.UID) // the cache shows our write
		case sameStatus(last, sb.Status):
			// Written moments ago; the cache still holds the status before it (another child's
			// event came first). Writing it again would only cost a request.
			return nil
		}
	}
	if err := r.client.Status().Patch(ctx, sb, client.MergeFrom(original), agentsv1beta1.FieldOwner); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.writtenStatus.Expect(key, sb.UID, *sb.Status.DeepCopy())
	return nil
}

// sameStatus compares two statuses but for their conditions' transition times: a status
// computed again from a stale copy stamps a condition that changed with a new time.
func sameStatus(a, b agentsv1beta1.SandboxStatus) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	for _, st := range []*agentsv1beta1.SandboxStatus{&a, &b} {
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = metav1.Time{}
		}
	}
	return equality.Semantic.DeepEqual(a, b)
}

// warmMemberPodUnseen: a warm pool member that has never had a status and whose pod no
// scheduler has looked at yet (it was created moments ago). Nobody reads a member's status
// before it is Ready — claims adopt only Ready members, the pool counts it as starting either
// way — and the pod's next event brings the next state, so this write is left out: one write
// fewer per refilled member. Every later state (pending with a reason, unschedulable, failed) is
// written as usual.
func warmMemberPodUnseen(original, sb *agentsv1beta1.Sandbox, obs observed) bool {
	owner := metav1.GetControllerOf(sb)
	if owner == nil || owner.Kind != "SandboxWarmPool" || len(original.Status.Conditions) > 0 {
		return false
	}
	if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); c == nil || c.Reason != agentsv1beta1.ReasonPodPending {
		return false
	}
	pod := obs.pod
	return pod != nil && pod.DeletionTimestamp.IsZero() && len(pod.Status.Conditions) == 0 &&
		(pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending)
}
