package v1alpha1

// The names of the contract have one source, v1beta1 (the hub and storage version), where
// each is documented; these are the same constants under the v1alpha1 package.

import extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"

// Labels and annotations the extension controllers put on the Sandboxes (and, through the pod
// template, the pods) they make.
const (
	TemplateRefHashLabel  = extv1beta1.TemplateRefHashLabel
	TemplateRefAnnotation = extv1beta1.TemplateRefAnnotation
	TemplateHashLabel     = extv1beta1.TemplateHashLabel
	WarmPoolLabel         = extv1beta1.WarmPoolLabel
	ClaimUIDLabel         = extv1beta1.ClaimUIDLabel
	LaunchTypeLabel       = extv1beta1.LaunchTypeLabel
)

// Annotations users put on the extension kinds.
const (
	MemberReadyTimeoutAnnotation = extv1beta1.MemberReadyTimeoutAnnotation
	RouterTokenAnnotation        = extv1beta1.RouterTokenAnnotation
	SandboxEgressAnnotation      = extv1beta1.SandboxEgressAnnotation
	SandboxEgressAllowed         = extv1beta1.SandboxEgressAllowed
	SandboxdContainerAnnotation  = extv1beta1.SandboxdContainerAnnotation
)

// The router token Secret: its label and the keys of its data.
const (
	RouterTokenSecretLabel = extv1beta1.RouterTokenSecretLabel

	RouterTokenKeyToken     = extv1beta1.RouterTokenKeyToken
	RouterTokenKeyNamespace = extv1beta1.RouterTokenKeyNamespace
	RouterTokenKeySandbox   = extv1beta1.RouterTokenKeySandbox
	RouterTokenKeyExpires   = extv1beta1.RouterTokenKeyExpires
)

// Launch types.
const (
	LaunchTypeWarm = extv1beta1.LaunchTypeWarm
	LaunchTypeCold = extv1beta1.LaunchTypeCold
)

// Condition types and reasons of a SandboxClaim.
const (
	ClaimConditionReady    = extv1beta1.ClaimConditionReady
	ClaimConditionFinished = extv1beta1.ClaimConditionFinished

	ReasonTemplateNotFound          = extv1beta1.ReasonTemplateNotFound
	ReasonEnvVarsInjectionRejected  = extv1beta1.ReasonEnvVarsInjectionRejected
	ReasonInvalidMetadata           = extv1beta1.ReasonInvalidMetadata
	ReasonClaimExpired              = extv1beta1.ReasonClaimExpired
	ReasonSandboxNotReady           = extv1beta1.ReasonSandboxNotReady
	ReasonSandboxNotOwned           = extv1beta1.ReasonSandboxNotOwned
	ReasonWarmPoolNotFound          = extv1beta1.ReasonWarmPoolNotFound
	ReasonSandboxMissing            = extv1beta1.ReasonSandboxMissing
	ReasonVolumeClaimTemplatesError = extv1beta1.ReasonVolumeClaimTemplatesError

	EventSandboxProvisioned = extv1beta1.EventSandboxProvisioned
)

// Condition type and reasons of a SandboxWarmPool, and its event reasons.
const (
	PoolConditionReady = extv1beta1.PoolConditionReady

	ReasonPoolReady            = extv1beta1.ReasonPoolReady
	ReasonPoolFilling          = extv1beta1.ReasonPoolFilling
	ReasonMembersUnschedulable = extv1beta1.ReasonMembersUnschedulable
	ReasonPoolTemplateNotFound = extv1beta1.ReasonPoolTemplateNotFound

	EventMemberNotReady      = extv1beta1.EventMemberNotReady
	EventSandboxCreateFailed = extv1beta1.EventSandboxCreateFailed
	ReasonMembersEdited      = extv1beta1.ReasonMembersEdited
)

// Event reasons of a SandboxTemplate.
const (
	EventReservedPodMetadata = extv1beta1.EventReservedPodMetadata
	EventPolicyConflict      = extv1beta1.EventPolicyConflict
)

// EffectiveWarmPool returns spec.warmpool with its default applied.
func (c *SandboxClaim) EffectiveWarmPool() WarmPoolPolicy {
	if c.Spec.WarmPool == nil || *c.Spec.WarmPool == "" {
		return WarmPoolPolicyDefault
	}
	return *c.Spec.WarmPool
}

// EffectiveUpdateStrategy returns spec.updateStrategy.type with its default applied.
func (p *SandboxWarmPool) EffectiveUpdateStrategy() SandboxWarmPoolUpdateStrategyType {
	if p.Spec.UpdateStrategy.Type == "" {
		return OnReplenishSandboxWarmPoolUpdateStrategyType
	}
	return p.Spec.UpdateStrategy.Type
}
