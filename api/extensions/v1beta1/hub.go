package v1beta1

// Hub marks the v1beta1 kinds as conversion hubs: v1beta1 is the storage version and the version
// the controllers read and write, so their own requests never go through the conversion webhook.
// api/extensions/v1alpha1 converts to and from them.
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
