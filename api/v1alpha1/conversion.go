package v1alpha1

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
	hub "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// SandboxConversionAnnotation is the annotation that carries, on a served v1alpha1 Sandbox, the
// v1beta1 fields v1alpha1 cannot hold (see hub.SandboxConversionAnnotation).
const SandboxConversionAnnotation = hub.SandboxConversionAnnotation

// sandboxBetaState is what a v1beta1 Sandbox has and v1alpha1 lacks; it rides on the served
// v1alpha1 object in SandboxConversionAnnotation.
type sandboxBetaState struct {
	Service  *bool  `json:"service,omitempty"`
	NodeName string `json:"nodeName,omitempty"`
}

// ConvertTo converts this v1alpha1 Sandbox to the hub (v1beta1, the storage version).
func (sb *Sandbox) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*hub.Sandbox)
	in := sb.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var beta sandboxBetaState
	convstate.Pop(&dst.ObjectMeta, SandboxConversionAnnotation, &beta)
	dst.Spec = hub.SandboxSpec{
		SandboxBlueprint: hub.SandboxBlueprint{
			PodTemplate:          PodTemplateToHub(in.Spec.PodTemplate),
			VolumeClaimTemplates: VolumeClaimTemplatesToHub(in.Spec.VolumeClaimTemplates),
			Service:              beta.Service,
		},
		Lifecycle: hub.Lifecycle{
			ShutdownTime:   in.Spec.ShutdownTime,
			ShutdownPolicy: (*hub.ShutdownPolicy)(in.Spec.ShutdownPolicy),
		},
		OperatingMode: operatingModeFor(in.Spec.Replicas),
	}
	dst.Status = hub.SandboxStatus{
		ServiceFQDN:   in.Status.ServiceFQDN,
		Service:       in.Status.Service,
		Conditions:    in.Status.Conditions,
		Replicas:      in.Status.Replicas,
		LabelSelector: in.Status.LabelSelector,
		PodIPs:        in.Status.PodIPs,
		NodeName:      beta.NodeName,
	}
	return nil
}

// ConvertFrom converts the hub (v1beta1) Sandbox to this v1alpha1 one.
func (sb *Sandbox) ConvertFrom(srcRaw conversion.Hub) error {
	dst := sb
	in := srcRaw.(*hub.Sandbox).DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	// v1beta1 holds everything v1alpha1 has; drop a stale annotation all the same.
	convstate.Pop(&dst.ObjectMeta, SandboxConversionAnnotation, &struct{}{})
	dst.Spec = SandboxSpec{
		PodTemplate:          PodTemplateFromHub(in.Spec.PodTemplate),
		VolumeClaimTemplates: VolumeClaimTemplatesFromHub(in.Spec.VolumeClaimTemplates),
		Lifecycle: Lifecycle{
			ShutdownTime:   in.Spec.ShutdownTime,
			ShutdownPolicy: (*ShutdownPolicy)(in.Spec.ShutdownPolicy),
		},
		Replicas: replicasFor(in.Spec.OperatingMode),
	}
	dst.Status = SandboxStatus{
		ServiceFQDN:   in.Status.ServiceFQDN,
		Service:       in.Status.Service,
		Conditions:    in.Status.Conditions,
		Replicas:      in.Status.Replicas,
		LabelSelector: in.Status.LabelSelector,
		PodIPs:        in.Status.PodIPs,
	}
	beta := sandboxBetaState{Service: in.Spec.Service, NodeName: in.Status.NodeName}
	return convstate.Put(&dst.ObjectMeta, SandboxConversionAnnotation, beta, beta != (sandboxBetaState{}))
}

// replicasFor maps operatingMode to v1alpha1 spec.replicas: Suspended is 0, Running 1, unset
// stays unset (the API server defaults both to running).
func replicasFor(mode hub.SandboxOperatingMode) *int32 {
	if mode == "" {
		return nil
	}
	n := RunningReplicas
	if mode == hub.SandboxOperatingModeSuspended {
		n = PausedReplicas
	}
	return &n
}

// operatingModeFor is the inverse of replicasFor.
func operatingModeFor(replicas *int32) hub.SandboxOperatingMode {
	if replicas == nil {
		return ""
	}
	return hub.OperatingModeFor(*replicas)
}

// PodTemplateToHub converts a pod template to v1beta1.
func PodTemplateToHub(in PodTemplate) hub.PodTemplate {
	return hub.PodTemplate{Spec: in.Spec, ObjectMeta: hub.PodMetadata(in.Metadata)}
}

// PodTemplateFromHub converts a v1beta1 pod template.
func PodTemplateFromHub(in hub.PodTemplate) PodTemplate {
	return PodTemplate{Spec: in.Spec, Metadata: PodMetadata(in.ObjectMeta)}
}

// VolumeClaimTemplatesToHub converts volume claim templates to v1beta1 (nil stays nil).
func VolumeClaimTemplatesToHub(in []PersistentVolumeClaimTemplate) []hub.PersistentVolumeClaimTemplate {
	if in == nil {
		return nil
	}
	out := make([]hub.PersistentVolumeClaimTemplate, len(in))
	for i, t := range in {
		out[i] = hub.PersistentVolumeClaimTemplate{
			EmbeddedObjectMetadata: hub.EmbeddedObjectMetadata(t.EmbeddedObjectMetadata),
			Spec:                   t.Spec,
		}
	}
	return out
}

// VolumeClaimTemplatesFromHub converts v1beta1 volume claim templates (nil stays nil).
func VolumeClaimTemplatesFromHub(in []hub.PersistentVolumeClaimTemplate) []PersistentVolumeClaimTemplate {
	if in == nil {
		return nil
	}
	out := make([]PersistentVolumeClaimTemplate, len(in))
	for i, t := range in {
		out[i] = PersistentVolumeClaimTemplate{
			EmbeddedObjectMetadata: EmbeddedObjectMetadata(t.EmbeddedObjectMetadata),
			Spec:                   t.Spec,
		}
	}
	return out
}
