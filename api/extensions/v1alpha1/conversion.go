package v1alpha1

// Hub marks the v1alpha1 kinds as conversion hubs: v1alpha1 is the storage version and the version
// the controllers read and write, so their own requests never go through the conversion webhook.
// api/extensions/v1beta1 converts to and from them.
func (*SandboxClaim) Hub()    {}
func (*SandboxTemplate) Hub() {}
func (*SandboxWarmPool) Hub() {}

// Annotations that carry, as JSON, the fields an object's served version cannot hold, so that a
// round trip through the other version loses nothing (as Kubernetes' own APIs do). The
// conversion writes them on the way in and strips them on the way back.
const (
	SandboxClaimConversionAnnotation    = "agents.x-k8s.io/sandboxclaim-conversion"
	SandboxTemplateConversionAnnotation = "agents.x-k8s.io/sandboxtemplate-conversion"
	SandboxWarmPoolConversionAnnotation = "agents.x-k8s.io/sandboxwarmpool-conversion"
)

// ShadowPoolPrefix is how a v1alpha1 claim that names no specific warm pool ("default" or "none")
// appears in v1beta1, whose warmPoolRef is required: warmPoolRef.name = ShadowPoolPrefix +
// template name. Upstream agent-sandbox's own conversion and migration use the same convention.
const ShadowPoolPrefix = "shadow-pool-"
