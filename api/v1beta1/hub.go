package v1beta1

// Hub marks Sandbox as the conversion hub: v1beta1 is the storage version and the version the
// controllers read and write, so their own requests never go through the conversion webhook.
// api/v1alpha1 converts to and from it.
func (*Sandbox) Hub() {}

// SandboxConversionAnnotation carries, as JSON, the fields of a Sandbox that the version it is
// served in cannot hold (spec.service and status.nodeName on a v1alpha1 object), so that a round
// trip through the other version loses nothing. The conversion writes it on the way in and strips
// it on the way back.
const SandboxConversionAnnotation = "agents.x-k8s.io/sandbox-conversion"
