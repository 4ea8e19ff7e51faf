package sandbox

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// expired reports whether spec.shutdownTime has come.
func expired(sb *agentsv1beta1.Sandbox, now time.Time) bool {
	return sb.Spec.ShutdownTime != nil && !now.Before(sb.Spec.ShutdownTime.Time)
}

// untilExpiry is how long until spec.shutdownTime, so the reconcile is requeued exactly then
// instead of polling; zero when no shutdown is set.
func untilExpiry(sb *agentsv1beta1.Sandbox, now time.Time) time.Duration {
	if sb.Spec.ShutdownTime == nil {
		return 0
	}
	if d := sb.Spec.ShutdownTime.Sub(now); d > 0 {
		return d
	}
	return time.Millisecond
}

// reconcileExpired deletes the pod and Service of an expired Sandbox; with shutdownPolicy
// Delete the Sandbox goes too (and its PVCs through garbage collection), with Retain it stays
// with Ready=False/SandboxExpired and keeps its PVCs.
func (r *Reconciler) reconcileExpired(ctx context.Context, sb, original *agentsv1beta1.Sandbox) (ctrl.Result, error) {
	if err := r.deleteOwnedChildren(ctx, sb); err != nil {
		return ctrl.Result{}, err
	}
	if sb.EffectiveShutdownPolicy() == agentsv1beta1.ShutdownPolicyDelete {
		log.FromContext(ctx).V(2).Info("sandbox expired; deleting it", "shutdownTime", sb.Spec.ShutdownTime.Time, "shutdownPolicy", agentsv1beta1.ShutdownPolicyDelete)
		r.event(sb, corev1.EventTypeNormal, agentsv1beta1.ReasonExpired, "Sandbox expired; deleting it")
		err := r.client.Delete(ctx, sb, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &sb.UID})
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	wasExpired := meta.IsStatusConditionPresentAndEqual(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady, metav1.ConditionFalse) &&
		meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady).Reason == agentsv1beta1.ReasonExpired
	sb.Status.PodIPs = nil
	sb.Status.Service = ""
	sb.Status.ServiceFQDN = ""
	sb.Status.Replicas = 0
	sb.Status.LabelSelector = Selector(sb.Name)
	meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{
		Type:               agentsv1beta1.SandboxConditionReady,
		Status:             metav1.ConditionFalse,
		Reason:             agentsv1beta1.ReasonExpired,
		Message:            retainedMessage(sb),
		ObservedGeneration: sb.Generation,
	})
	if !wasExpired {
		log.FromContext(ctx).V(2).Info("sandbox expired; its pod and Service deleted, the sandbox and its volumes kept",
			"shutdownTime", sb.Spec.ShutdownTime.Time, "shutdownPolicy", sb.EffectiveShutdownPolicy())
		r.event(sb, corev1.EventTypeNormal, agentsv1beta1.ReasonExpired, retainedMessage(sb))
	}
	return ctrl.Result{}, r.writeStatus(ctx, original, sb, observed{})
}

// retainedMessage says what expiry under Retain (the default) did and did not do: a client that
// set only shutdownTime (the agent-session flow's TTL patch) may expect the Sandbox gone, and must learn from
// the condition (mirrored onto its claim) and the event how to get that.
func retainedMessage(sb *agentsv1beta1.Sandbox) string {
	return fmt.Sprintf("Sandbox expired at %s and was retained (shutdownPolicy Retain): its pod and Service were deleted, "+
		"the Sandbox and its volumes kept. Delete it (or its SandboxClaim) to remove it, or set shutdownPolicy Delete "+
		"to have expiry delete it", sb.Spec.ShutdownTime.UTC().Format(time.RFC3339))
}

func (r *Reconciler) deleteOwnedChildren(ctx context.Context, sb *agentsv1beta1.Sandbox) error {
	key := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, key, pod); err == nil {
		if metav1.IsControlledBy(pod, sb) && pod.DeletionTimestamp.IsZero() {
			log.FromContext(ctx).V(2).Info("deleting the expired sandbox's pod", "pod", klog.KObj(pod))
			if err := r.deletePod(ctx, pod); err != nil {
				return err
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	svc := &corev1.Service{}
	if err := r.client.Get(ctx, key, svc); err == nil {
		if metav1.IsControlledBy(svc, sb) && svc.DeletionTimestamp.IsZero() {
			err := r.client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID})
			if client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func (r *Reconciler) event(sb *agentsv1beta1.Sandbox, eventType, reason, message string) {
	r.recorder.Event(sb, eventType, reason, message)
}
