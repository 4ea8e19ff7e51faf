package v1alpha1

import (
	hub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
)

// Annotations that carry, on a served v1alpha1 object, the v1beta1 fields v1alpha1 cannot hold
// (and, on a stored v1beta1 object, the v1alpha1 fields v1beta1 cannot hold). See
// api/extensions/v1beta1.
const (
	SandboxClaimConversionAnnotation    = hub.SandboxClaimConversionAnnotation
	SandboxTemplateConversionAnnotation = hub.SandboxTemplateConversionAnnotation
	SandboxWarmPoolConversionAnnotation = hub.SandboxWarmPoolConversionAnnotation
)

// ShadowPoolPrefix is how a claim that names no specific warm pool appears in v1beta1
// (warmPoolRef.name = ShadowPoolPrefix + template name).
const ShadowPoolPrefix = hub.ShadowPoolPrefix
