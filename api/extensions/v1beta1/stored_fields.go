package v1beta1

import (
	hub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
	agentshub "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// The v1beta1-only fields the controllers act on, read from the stored (v1alpha1) objects where
// the conversion keeps them.

// ClaimVolumeClaimTemplates returns the spec.volumeClaimTemplates a claim was given in v1beta1,
// as v1alpha1 templates; nil when it has none.
func ClaimVolumeClaimTemplates(c *hub.SandboxClaim) []agentshub.PersistentVolumeClaimTemplate {
	var beta claimBetaState
	if !convstate.Peek(c.Annotations, hub.SandboxClaimConversionAnnotation, &beta) {
		return nil
	}
	return agentsv1beta1.VolumeClaimTemplatesToHub(beta.VolumeClaimTemplates)
}

// TemplateVolumeClaimTemplatesPolicy returns a template's v1beta1 volumeClaimTemplatesPolicy,
// Disallowed (its default) when it was never set.
func TemplateVolumeClaimTemplatesPolicy(t *hub.SandboxTemplate) VolumeClaimTemplatesPolicy {
	var beta templateBetaState
	if convstate.Peek(t.Annotations, hub.SandboxTemplateConversionAnnotation, &beta) && beta.VolumeClaimTemplatesPolicy != "" {
		return beta.VolumeClaimTemplatesPolicy
	}
	return VolumeClaimTemplatesPolicyDisallowed
}
