package v1beta1

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	hub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// templateBetaState is what a v1beta1 template has and v1alpha1 lacks, kept on the stored object.
type templateBetaState struct {
	Service                    *bool                      `json:"service,omitempty"`
	VolumeClaimTemplatesPolicy VolumeClaimTemplatesPolicy `json:"volumeClaimTemplatesPolicy,omitempty"`
}

// ConvertTo converts this v1beta1 SandboxTemplate to the hub (v1alpha1).
func (t *SandboxTemplate) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*hub.SandboxTemplate)
	in := t.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	// v1alpha1 has nothing v1beta1 lacks; drop a stale annotation all the same.
	convstate.Pop(&dst.ObjectMeta, hub.SandboxTemplateConversionAnnotation, &struct{}{})
	dst.Spec = hub.SandboxTemplateSpec{
		PodTemplate:             agentsv1beta1.PodTemplateToHub(in.Spec.PodTemplate),
		VolumeClaimTemplates:    agentsv1beta1.VolumeClaimTemplatesToHub(in.Spec.VolumeClaimTemplates),
		NetworkPolicy:           (*hub.NetworkPolicySpec)(in.Spec.NetworkPolicy),
		NetworkPolicyManagement: hub.NetworkPolicyManagement(in.Spec.NetworkPolicyManagement),
		EnvVarsInjectionPolicy:  hub.EnvVarsInjectionPolicy(in.Spec.EnvVarsInjectionPolicy),
	}
	dst.Status = hub.SandboxTemplateStatus{}
	beta := templateBetaState{Service: in.Spec.Service, VolumeClaimTemplatesPolicy: in.Spec.VolumeClaimTemplatesPolicy}
	return convstate.Put(&dst.ObjectMeta, hub.SandboxTemplateConversionAnnotation, beta, beta != (templateBetaState{}))
}

// ConvertFrom converts the hub (v1alpha1) SandboxTemplate to this v1beta1 one.
func (t *SandboxTemplate) ConvertFrom(srcRaw conversion.Hub) error {
	dst := t
	in := srcRaw.(*hub.SandboxTemplate).DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var beta templateBetaState
	convstate.Pop(&dst.ObjectMeta, hub.SandboxTemplateConversionAnnotation, &beta)
	dst.Spec = SandboxTemplateSpec{
		SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate:          agentsv1beta1.PodTemplateFromHub(in.Spec.PodTemplate),
			VolumeClaimTemplates: agentsv1beta1.VolumeClaimTemplatesFromHub(in.Spec.VolumeClaimTemplates),
			Service:              beta.Service,
		},
		NetworkPolicy:              (*NetworkPolicySpec)(in.Spec.NetworkPolicy),
		NetworkPolicyManagement:    NetworkPolicyManagement(in.Spec.NetworkPolicyManagement),
		EnvVarsInjectionPolicy:     EnvVarsInjectionPolicy(in.Spec.EnvVarsInjectionPolicy),
		VolumeClaimTemplatesPolicy: beta.VolumeClaimTemplatesPolicy,
	}
	return nil
}
