package v1beta1

// Labels and annotations the extension controllers put on the Sandboxes (and, through the pod
// template, the pods) they make.
const (
	// TemplateRefHashLabel is v1alpha1.NameHash(template name); the template's NetworkPolicy selects pods by it.
	TemplateRefHashLabel = "agents.x-k8s.io/sandbox-template-ref-hash"
	// TemplateRefAnnotation is the name of the template a Sandbox was made from.
	TemplateRefAnnotation = "agents.x-k8s.io/sandbox-template-ref"
	// TemplateHashLabel is a hash of the template spec a Sandbox was made from; a pool member
	// whose hash differs from the template's current one is stale.
	TemplateHashLabel = "agents.x-k8s.io/sandbox-template-hash"
	// WarmPoolLabel is v1alpha1.NameHash(pool name) on a pool's unclaimed members and their pods.
	WarmPoolLabel = "agents.x-k8s.io/warm-pool-sandbox"
	// ClaimUIDLabel is the UID of the claim that owns a Sandbox.
	ClaimUIDLabel = "agents.x-k8s.io/claim-uid"
	// LaunchTypeLabel says how a claimed Sandbox was obtained: warm (adopted) or cold (created).
	LaunchTypeLabel = "agents.x-k8s.io/launch-type"
)

// Annotations users put on the extension kinds.
const (
	// MemberReadyTimeoutAnnotation on a pool overrides the controller's timeout for that pool (a
	// Go duration such as "10m"), for templates whose images take long to pull.
	MemberReadyTimeoutAnnotation = "agents.x-k8s.io/member-ready-timeout"
	// RouterTokenAnnotation on a SandboxClaim, set to "true", asks for a scoped router token
	// (kept in the Secret <claim>-router-token).
	RouterTokenAnnotation = "agents.x-k8s.io/router-token"
	// SandboxEgressAnnotation on a template, set to SandboxEgressAllowed, lets the egress
	// annotations of Sandboxes made from it take effect (they add to the template's
	// NetworkPolicy); without it they are ignored there, so a claim's user cannot widen what the
	// template's author allows.
	SandboxEgressAnnotation = "agents.x-k8s.io/sandbox-egress"
	SandboxEgressAllowed    = "allowed"
	// SandboxdContainerAnnotation on a template names the container that runs sandboxd on the
	// router's ports (8888, 9090). Claims whose env targets only that container are then served
	// warm: the env reaches every process sandboxd starts (not the container's own process, nor
	// a kubectl exec). Without it, a claim with env starts cold, the env in the pod spec.
	SandboxdContainerAnnotation = "agents.x-k8s.io/sandboxd-container"
)

// The router token Secret: its label and the keys of its data.
const (
	// RouterTokenSecretLabel marks the router token Secrets the controller manages.
	RouterTokenSecretLabel = "agents.x-k8s.io/router-token"

	RouterTokenKeyToken     = "token"
	RouterTokenKeyNamespace = "namespace"
	RouterTokenKeySandbox   = "sandbox"
	RouterTokenKeyExpires   = "expires" // RFC 3339
)

// Launch types.
const (
	LaunchTypeWarm = "warm"
	LaunchTypeCold = "cold"
)

// Condition types and reasons of a SandboxClaim.
const (
	ClaimConditionReady    = "Ready"
	ClaimConditionFinished = "Finished"

	ReasonTemplateNotFound         = "TemplateNotFound"
	ReasonEnvVarsInjectionRejected = "EnvVarsInjectionRejected"
	ReasonInvalidMetadata          = "InvalidMetadata"
	ReasonClaimExpired             = "ClaimExpired"
	ReasonSandboxNotReady          = "SandboxNotReady"
	ReasonSandboxNotOwned          = "SandboxNotOwned"
	ReasonWarmPoolNotFound         = "WarmPoolNotFound"
	// ReasonSandboxMissing: the claim's Sandbox was deleted under it. The claim does not make a
	// new one behind its user's back (its state and lifecycle are gone); delete the claim.
	ReasonSandboxMissing = "SandboxMissing"
	// ReasonVolumeClaimTemplatesError: the claim's volumeClaimTemplates (v1beta1) are not allowed
	// by its template's volumeClaimTemplatesPolicy. Upstream's Python SDK treats it as terminal.
	ReasonVolumeClaimTemplatesError = "VolumeClaimTemplatesError"

	// EventSandboxProvisioned: the claim's Sandbox was created from its template (a cold start).
	EventSandboxProvisioned = "SandboxProvisioned"
)

// Condition type and reasons of a SandboxWarmPool, and its event reasons.
const (
	PoolConditionReady = "Ready"

	ReasonPoolReady            = "PoolReady"
	ReasonPoolFilling          = "Filling"
	ReasonMembersUnschedulable = "MembersUnschedulable"
	ReasonPoolTemplateNotFound = "TemplateNotFound"

	// EventMemberNotReady: a member that never became Ready in time was replaced.
	EventMemberNotReady = "MemberNotReady"
	// EventSandboxCreateFailed: creating a warm member failed.
	EventSandboxCreateFailed = "SandboxCreateFailed"
	// ReasonMembersEdited: members whose spec was changed after the pool made them were
	// replaced (no claim adopts them).
	ReasonMembersEdited = "MembersEdited"
)

// Event reasons of a SandboxTemplate.
const (
	// EventReservedPodMetadata: the template's pod labels or annotations use a reserved domain
	// or the router's labels; those keys are left out of every Sandbox made from it.
	EventReservedPodMetadata = "ReservedPodMetadata"
	// EventPolicyConflict: a NetworkPolicy of the template's name exists that the controller did
	// not make; it is left alone.
	EventPolicyConflict = "NetworkPolicyConflict"
)

// DesiredReplicas returns spec.replicas with its default (1) applied.
func (p *SandboxWarmPool) DesiredReplicas() int32 {
	if p.Spec.Replicas == nil {
		return 1
	}
	return *p.Spec.Replicas
}

// EffectiveUpdateStrategy returns spec.updateStrategy.type with its default applied.
func (p *SandboxWarmPool) EffectiveUpdateStrategy() SandboxWarmPoolUpdateStrategyType {
	if p.Spec.UpdateStrategy == nil || p.Spec.UpdateStrategy.Type == "" {
		return OnReplenishSandboxWarmPoolUpdateStrategyType
	}
	return p.Spec.UpdateStrategy.Type
}
