package testwrap

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// The Hub methods return a wrapper's object in the storage version (v1beta1), converted the way
// the API server's conversion webhook converts a v1alpha1 object: what the controllers, which
// work on v1beta1, read after a v1alpha1 client wrote the object. The v1beta1 wrappers' Hub is
// their Obj.

// Hub returns the Sandbox converted to v1beta1.
func (w *SandboxWrapper) Hub() *agentsv1beta1.Sandbox {
	return toHub(w.Obj(), &agentsv1beta1.Sandbox{})
}

// Hub returns the template converted to v1beta1.
func (w *TemplateWrapper) Hub() *extv1beta1.SandboxTemplate {
	return toHub(w.Obj(), &extv1beta1.SandboxTemplate{})
}

// Hub returns the claim converted to v1beta1; a selection warmPoolRef cannot express rides in
// the claim's conversion annotation, as on a stored claim.
func (w *ClaimWrapper) Hub() *extv1beta1.SandboxClaim {
	return toHub(w.Obj(), &extv1beta1.SandboxClaim{})
}

// Hub returns the pool converted to v1beta1.
func (w *WarmPoolWrapper) Hub() *extv1beta1.SandboxWarmPool {
	return toHub(w.Obj(), &extv1beta1.SandboxWarmPool{})
}

// Hub returns the volume claim template in v1beta1.
func (w *VolumeClaimWrapper) Hub() agentsv1beta1.PersistentVolumeClaimTemplate { return w.ObjV1beta1() }

// Hub returns the Sandbox (already v1beta1).
func (w *SandboxV1beta1Wrapper) Hub() *agentsv1beta1.Sandbox { return w.Obj() }

// Hub returns the template (already v1beta1).
func (w *TemplateV1beta1Wrapper) Hub() *extv1beta1.SandboxTemplate { return w.Obj() }

// Hub returns the claim (already v1beta1).
func (w *ClaimV1beta1Wrapper) Hub() *extv1beta1.SandboxClaim { return w.Obj() }

// toHub converts a v1alpha1 object the wrappers built, which always converts.
func toHub[H conversion.Hub](from conversion.Convertible, to H) H {
	if err := from.ConvertTo(to); err != nil {
		panic("testwrap: converting to v1beta1: " + err.Error())
	}
	return to
}
