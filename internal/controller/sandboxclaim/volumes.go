package sandboxclaim

import (
	"fmt"
	"slices"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// claimVolumes returns the Sandbox's volume claim templates when the claim brings its own
// (v1beta1 spec.volumeClaimTemplates): the template's, merged with the claim's as the template's
// volumeClaimTemplatesPolicy allows. It returns nil when the claim brings none. A claim that
// brings volumes always starts cold: a warm pod cannot take on new volumes.
func claimVolumes(claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate) ([]agentsv1beta1.PersistentVolumeClaimTemplate, error) {
	own := claim.Spec.VolumeClaimTemplates
	if len(own) == 0 {
		return nil, nil
	}
	policy := tmpl.Spec.VolumeClaimTemplatesPolicy
	if policy == "" || policy == extv1beta1.VolumeClaimTemplatesPolicyDisallowed {
		return nil, &userError{extv1beta1.ReasonVolumeClaimTemplatesError, fmt.Sprintf(
			"the claim sets volumeClaimTemplates but SandboxTemplate %q does not allow it (volumeClaimTemplatesPolicy Disallowed)", tmpl.Name)}
	}
	out := slices.Clone(tmpl.Spec.VolumeClaimTemplates)
	for _, v := range own {
		i := slices.IndexFunc(out, func(t agentsv1beta1.PersistentVolumeClaimTemplate) bool { return t.Name == v.Name })
		switch {
		case i < 0:
			out = append(out, v)
		case policy == extv1beta1.VolumeClaimTemplatesPolicyOverrides:
			out[i] = v
		default:
			return nil, &userError{extv1beta1.ReasonVolumeClaimTemplatesError, fmt.Sprintf(
				"volume claim template %q is defined by SandboxTemplate %q, whose volumeClaimTemplatesPolicy Allowed only adds new ones", v.Name, tmpl.Name)}
		}
	}
	return out, nil
}
