package sandboxwarmpool

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// DefaultMemberReadyTimeout is how long a member may take to become Ready before it is
// replaced: long enough for an image pull on a fresh node, short enough that a crash-looping
// or unpullable member does not hold a pool slot for good.
const DefaultMemberReadyTimeout = 5 * time.Minute

// health sorts the not-ready members: those that cannot be scheduled (replacing them would not
// help, so they are reported and kept), those past the timeout (replaced), and when the next
// one will cross it.
type health struct {
	unschedulable []*agentsv1beta1.Sandbox
	overdue       []*agentsv1beta1.Sandbox
	nextDue       time.Duration // 0: no member is waiting to cross the timeout
}

func assess(members []*agentsv1beta1.Sandbox, now time.Time, timeout time.Duration) health {
	var h health
	for _, sb := range members {
		if isReady(sb) {
			continue
		}
		if unschedulable(sb) {
			h.unschedulable = append(h.unschedulable, sb)
			continue
		}
		left := sb.CreationTimestamp.Add(timeout).Sub(now)
		if left <= 0 {
			h.overdue = append(h.overdue, sb)
			continue
		}
		if h.nextDue == 0 || left < h.nextDue {
			h.nextDue = left
		}
	}
	return h
}

// unschedulable: the Sandbox controller reports a pending pod with the scheduler's reason.
func unschedulable(sb *agentsv1beta1.Sandbox) bool {
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	return c != nil && c.Reason == agentsv1beta1.ReasonPodPending && strings.Contains(c.Message, corev1.PodReasonUnschedulable)
}

// replaceOverdue deletes members that never became Ready in time, telling the pool's owner
// why; the refill that follows makes new ones.
func (r *Reconciler) replaceOverdue(ctx context.Context, pool *extv1beta1.SandboxWarmPool, overdue []*agentsv1beta1.Sandbox) error {
	for _, sb := range overdue {
		why := "no Ready condition"
		if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); c != nil {
			why = c.Reason + ": " + c.Message
		}
		r.recorder.Eventf(pool, corev1.EventTypeWarning, extv1beta1.EventMemberNotReady,
			"replacing warm sandbox %s: not Ready %s after it was created (%s)", sb.Name, r.readyTimeoutOf(pool), why)
	}
	return r.deleteMembers(ctx, pool, overdue)
}

// readyCondition says whether the pool is full of ready members and, if not, why.
func readyCondition(pool *extv1beta1.SandboxWarmPool, ready int, h health, templateFound bool) metav1.Condition {
	c := metav1.Condition{Type: extv1beta1.PoolConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: pool.Generation}
	switch {
	case !templateFound:
		c.Reason, c.Message = extv1beta1.ReasonPoolTemplateNotFound, fmt.Sprintf("SandboxTemplate %q not found", pool.Spec.TemplateRef.Name)
	case len(h.unschedulable) > 0:
		c.Reason = extv1beta1.ReasonMembersUnschedulable
		c.Message = fmt.Sprintf("%d of the pool's sandboxes cannot be scheduled (e.g. %s: %s)", len(h.unschedulable),
			h.unschedulable[0].Name, meta.FindStatusCondition(h.unschedulable[0].Status.Conditions, agentsv1beta1.SandboxConditionReady).Message)
	case ready >= int(pool.DesiredReplicas()):
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, extv1beta1.ReasonPoolReady, fmt.Sprintf("%d of %d sandboxes ready", ready, pool.DesiredReplicas())
	default:
		c.Reason, c.Message = extv1beta1.ReasonPoolFilling, fmt.Sprintf("%d of %d sandboxes ready", ready, pool.DesiredReplicas())
	}
	return c
}

func (r *Reconciler) readyTimeoutOf(pool *extv1beta1.SandboxWarmPool) time.Duration {
	if d, err := time.ParseDuration(pool.Annotations[extv1beta1.MemberReadyTimeoutAnnotation]); err == nil && d > 0 {
		return d
	}
	return r.memberReadyTimeout
}
