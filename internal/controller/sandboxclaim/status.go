package sandboxclaim

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// mirrorSandbox copies what integrators poll — status.sandbox.name and .podIPs — and the
// Sandbox's Ready and Finished conditions onto the claim.
func mirrorSandbox(claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) {
	claim.Status.SandboxStatus.Name = sb.Name
	// Integrators (the claim-per-conversation flow) poll podIPs as the readiness signal and connect at once, so they
	// appear only with Ready, never for a pod that is still starting.
	claim.Status.SandboxStatus.PodIPs = nil
	if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) && len(sb.Status.PodIPs) > 0 {
		claim.Status.SandboxStatus.PodIPs = append([]string(nil), sb.Status.PodIPs...)
	}
	ready := metav1.Condition{Type: extv1beta1.ClaimConditionReady, Status: metav1.ConditionFalse,
		Reason: extv1beta1.ReasonSandboxNotReady, Message: "Waiting for the Sandbox controller to report on " + sb.Name}
	if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); c != nil {
		ready.Status, ready.Reason, ready.Message = c.Status, c.Reason, c.Message
	}
	if note := sessionEnvNote(sb); note != "" && ready.Status == metav1.ConditionTrue {
		ready.Message += "; " + note
	}
	ready.ObservedGeneration = claim.Generation
	meta.SetStatusCondition(&claim.Status.Conditions, ready)

	if f := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionFinished); f != nil {
		meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{
			Type: extv1beta1.ClaimConditionFinished, Status: f.Status, Reason: f.Reason, Message: f.Message,
			LastTransitionTime: f.LastTransitionTime, ObservedGeneration: claim.Generation,
		})
	} else {
		meta.RemoveStatusCondition(&claim.Status.Conditions, extv1beta1.ClaimConditionFinished)
	}
}

// becameExpired: the claim's Ready condition now mirrors an expired Sandbox and did not before.
func becameExpired(before, after *extv1beta1.SandboxClaim) bool {
	isExpired := func(c *extv1beta1.SandboxClaim) bool {
		r := meta.FindStatusCondition(c.Status.Conditions, extv1beta1.ClaimConditionReady)
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == agentsv1beta1.ReasonExpired
	}
	return isExpired(after) && !isExpired(before)
}

// setSandboxMissing reports that the claim's Sandbox is gone; the name stays, as the record of
// which Sandbox it was.
func setSandboxMissing(claim *extv1beta1.SandboxClaim) {
	claim.Status.SandboxStatus.PodIPs = nil
	setUserError(claim, &userError{extv1beta1.ReasonSandboxMissing, fmt.Sprintf(
		"Sandbox %q was deleted; its state is gone and this claim does not replace it. Delete the claim (and create a new one) to get a fresh sandbox",
		claim.Status.SandboxStatus.Name)})
}

func setUserError(claim *extv1beta1.SandboxClaim, err *userError) {
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{
		Type: extv1beta1.ClaimConditionReady, Status: metav1.ConditionFalse,
		Reason: err.reason, Message: err.message, ObservedGeneration: claim.Generation,
	})
}

func setReconcileError(claim *extv1beta1.SandboxClaim, err error) {
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{
		Type: extv1beta1.ClaimConditionReady, Status: metav1.ConditionFalse,
		Reason: agentsv1beta1.ReasonReconcilerError, Message: "Error seen: " + err.Error(), ObservedGeneration: claim.Generation,
	})
}

// catchUpStatus puts the status this process last wrote on a claim read from a cache that has
// not shown that write yet. Rebuilding the status from the stale copy would give its conditions
// new transition times, and the status would be written again for nothing; starting from what
// the API server holds keeps one write per change. This controller is the status's only writer.
func (r *Reconciler) catchUpStatus(claim *extv1beta1.SandboxClaim) {
	key := client.ObjectKeyFromObject(claim)
	last, ok := r.written.Get(key, claim.UID)
	switch {
	case !ok:
	case equality.Semantic.DeepEqual(&claim.Status, last):
		r.written.Observed(key, claim.UID) // the cache has caught up
	default:
		claim.Status = *last.DeepCopy()
	}
}

// writeStatus writes the claim status when it changed from what the API server holds (see
// catchUpStatus), and remembers it until the cache shows it.
func (r *Reconciler) writeStatus(ctx context.Context, original, claim *extv1beta1.SandboxClaim) error {
	if equality.Semantic.DeepEqual(original.Status, claim.Status) {
		return nil
	}
	if err := r.client.Status().Patch(ctx, claim, client.MergeFrom(original)); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.written.Expect(client.ObjectKeyFromObject(claim), claim.UID, claim.Status.DeepCopy())
	return nil
}
