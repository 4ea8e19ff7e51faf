package sandboxclaim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// expiry returns when the claim ends — the earlier of spec.lifecycle.shutdownTime and the
// mirrored Finished condition's time plus ttlSecondsAfterFinished — and whether that has come.
// The zero time means never.
func expiry(claim *extv1beta1.SandboxClaim, now time.Time) (at time.Time, due bool) {
	at, _ = endOf(claim)
	return at, !at.IsZero() && !now.Before(at)
}

// endOf returns when the claim ends and whether that is the finished-TTL (which removes the
// claim) rather than shutdownTime (which follows shutdownPolicy).
func endOf(claim *extv1beta1.SandboxClaim) (at time.Time, byTTL bool) {
	lc := claim.Spec.Lifecycle
	if lc == nil {
		return time.Time{}, false
	}
	if lc.ShutdownTime != nil {
		at = lc.ShutdownTime.Time
	}
	if lc.TTLSecondsAfterFinished != nil {
		if f := meta.FindStatusCondition(claim.Status.Conditions, extv1beta1.ClaimConditionFinished); f != nil && f.Status == metav1.ConditionTrue {
			ttlAt := f.LastTransitionTime.Add(time.Duration(*lc.TTLSecondsAfterFinished) * time.Second)
			if at.IsZero() || ttlAt.Before(at) {
				at, byTTL = ttlAt, true
			}
		}
	}
	return at, byTTL
}

// expire ends the claim per shutdownPolicy: Delete and DeleteForeground delete the claim (the
// Sandbox, Pod and PVCs follow through garbage collection; foreground keeps the claim visible
// until they are gone); Retain deletes the Sandbox and keeps the claim, marked expired.
func (r *Reconciler) expire(ctx context.Context, p *pass, sb *agentsv1beta1.Sandbox, at time.Time) error {
	claim := p.claim
	policy := claim.Spec.Lifecycle.ShutdownPolicy
	if _, byTTL := endOf(claim); byTTL && policy != extv1beta1.ShutdownPolicyDeleteForeground {
		// ttlSecondsAfterFinished removes the finished claim itself.
		policy = extv1beta1.ShutdownPolicyDelete
	}
	if !claimExpired(p.original) {
		p.event(corev1.EventTypeNormal, extv1beta1.ReasonClaimExpired, "Claim expired at %s (shutdownPolicy %s)", at.UTC().Format(time.RFC3339), policyOrDefault(policy))
	}
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{
		Type: extv1beta1.ClaimConditionReady, Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonClaimExpired,
		Message: fmt.Sprintf("Claim expired at %s; its sandbox is being deleted", at.UTC().Format(time.RFC3339)), ObservedGeneration: claim.Generation,
	})
	claim.Status.SandboxStatus.PodIPs = nil
	switch policy {
	case extv1beta1.ShutdownPolicyDelete:
		log.FromContext(ctx).V(2).Info("deleting the expired claim; its sandbox follows", "shutdownPolicy", policy)
		p.claimDeleted = true
		return client.IgnoreNotFound(r.client.Delete(ctx, claim,
			client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &claim.UID}))
	case extv1beta1.ShutdownPolicyDeleteForeground:
		// The expired status is written first, so it is what users see while the claim waits
		// for its Sandbox to go.
		log.FromContext(ctx).V(2).Info("deleting the expired claim in the foreground, after its status", "shutdownPolicy", policy)
		p.afterWrite = func(ctx context.Context) error {
			return client.IgnoreNotFound(r.client.Delete(ctx, claim,
				client.PropagationPolicy(metav1.DeletePropagationForeground), client.Preconditions{UID: &claim.UID}))
		}
		return nil
	}
	if sb != nil && sb.DeletionTimestamp.IsZero() {
		log.FromContext(ctx).V(2).Info("deleting the expired claim's sandbox; the claim stays", "sandbox", klog.KObj(sb), "shutdownPolicy", policyOrDefault(policy))
		if err := r.client.Delete(ctx, sb, client.Preconditions{UID: &sb.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

func claimExpired(claim *extv1beta1.SandboxClaim) bool {
	c := meta.FindStatusCondition(claim.Status.Conditions, extv1beta1.ClaimConditionReady)
	return c != nil && c.Reason == extv1beta1.ReasonClaimExpired
}

func policyOrDefault(p extv1beta1.ShutdownPolicy) extv1beta1.ShutdownPolicy {
	if p == "" {
		return extv1beta1.ShutdownPolicyRetain
	}
	return p
}
