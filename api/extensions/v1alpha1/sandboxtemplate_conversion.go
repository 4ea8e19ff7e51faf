package v1alpha1

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	hub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentshub "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// templateBetaState is what a v1beta1 template has and v1alpha1 lacks, kept on the served
// v1alpha1 object. volumeClaimTemplatesPolicy is kept only when it is not the default
// (Disallowed), which the API server writes into every stored template: a v1alpha1 reader of a
// template nobody set it on sees no annotation.
type templateBetaState struct {
	Service                    *bool                          `json:"service,omitempty"`
	VolumeClaimTemplatesPolicy hub.VolumeClaimTemplatesPolicy `json:"volumeClaimTemplatesPolicy,omitempty"`
}

// ConvertTo converts this v1alpha1 SandboxTemplate to the hub (v1beta1, the storage version).
func (t *SandboxTemplate) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*hub.SandboxTemplate)
	in := t.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var beta templateBetaState
	convstate.Pop(&dst.ObjectMeta, SandboxTemplateConversionAnnotation, &beta)
	policy := beta.VolumeClaimTemplatesPolicy
	if policy == "" {
		policy = hub.VolumeClaimTemplatesPolicyDisallowed
	}
	dst.Spec = hub.SandboxTemplateSpec{
		SandboxBlueprint: agentshub.SandboxBlueprint{
			PodTemplate:          agentsv1alpha1.PodTemplateToHub(in.Spec.PodTemplate),
			VolumeClaimTemplates: agentsv1alpha1.VolumeClaimTemplatesToHub(in.Spec.VolumeClaimTemplates),
			Service:              beta.Service,
		},
		NetworkPolicy:              (*hub.NetworkPolicySpec)(in.Spec.NetworkPolicy),
		NetworkPolicyManagement:    hub.NetworkPolicyManagement(in.Spec.NetworkPolicyManagement),
		EnvVarsInjectionPolicy:     hub.EnvVarsInjectionPolicy(in.Spec.EnvVarsInjectionPolicy),
		VolumeClaimTemplatesPolicy: policy,
	}
	return nil
}

// ConvertFrom converts the hub (v1beta1) SandboxTemplate to this v1alpha1 one.
func (t *SandboxTemplate) ConvertFrom(srcRaw conversion.Hub) error {
	dst := t
	in := srcRaw.(*hub.SandboxTemplate).DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	// v1beta1 holds everything v1alpha1 has; drop a stale annotation all the same.
	convstate.Pop(&dst.ObjectMeta, SandboxTemplateConversionAnnotation, &struct{}{})
	dst.Spec = SandboxTemplateSpec{
		PodTemplate:             agentsv1alpha1.PodTemplateFromHub(in.Spec.PodTemplate),
		VolumeClaimTemplates:    agentsv1alpha1.VolumeClaimTemplatesFromHub(in.Spec.VolumeClaimTemplates),
		NetworkPolicy:           (*NetworkPolicySpec)(in.Spec.NetworkPolicy),
		NetworkPolicyManagement: NetworkPolicyManagement(in.Spec.NetworkPolicyManagement),
		EnvVarsInjectionPolicy:  EnvVarsInjectionPolicy(in.Spec.EnvVarsInjectionPolicy),
	}
	dst.Status = SandboxTemplateStatus{}
	beta := templateBetaState{Service: in.Spec.Service}
	if in.Spec.VolumeClaimTemplatesPolicy != hub.VolumeClaimTemplatesPolicyDisallowed {
		beta.VolumeClaimTemplatesPolicy = in.Spec.VolumeClaimTemplatesPolicy
	}
	return convstate.Put(&dst.ObjectMeta, SandboxTemplateConversionAnnotation, beta, beta != (templateBetaState{}))
}
