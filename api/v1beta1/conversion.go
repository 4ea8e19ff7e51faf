package v1beta1

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
	hub "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// sandboxBetaState is what a v1beta1 Sandbox has and v1alpha1 lacks; it rides on the stored
// (v1alpha1) object in hub.SandboxConversionAnnotation.
type sandboxBetaState struct {
	Service  *bool  `json:"service,omitempty"`
	NodeName string `json:"nodeName,omitempty"`
}

// sandboxAlphaState is what a v1alpha1 Sandbox has and v1beta1 lacks; it rides on the served
// v1beta1 object in the same annotation, only when it cannot be derived (status.replicas is
// derived from status.podIPs: 1 with a pod IP, else 0).
type sandboxAlphaState struct {
	StatusReplicas *int32 `json:"statusReplicas,omitempty"`
}

// statusReplicas is v1alpha1 status.replicas as the v1beta1 status implies it.
func statusReplicas(st SandboxStatus) int32 {
	if len(st.PodIPs) > 0 {
		return 1
	}
	return 0
}

// ConvertTo converts this v1beta1 Sandbox to the hub (v1alpha1).
func (sb *Sandbox) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*hub.Sandbox)
	in := sb.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var alpha sandboxAlphaState
	convstate.Pop(&dst.ObjectMeta, hub.SandboxConversionAnnotation, &alpha)
	dst.Spec = hub.SandboxSpec{
		PodTemplate:          PodTemplateToHub(in.Spec.PodTemplate),
		VolumeClaimTemplates: VolumeClaimTemplatesToHub(in.Spec.VolumeClaimTemplates),
		Lifecycle: hub.Lifecycle{
			ShutdownTime:   in.Spec.ShutdownTime,
			ShutdownPolicy: (*hub.ShutdownPolicy)(in.Spec.ShutdownPolicy),
		},
		Replicas: replicasFor(in.Spec.OperatingMode),
	}
	replicas := statusReplicas(in.Status)
	if alpha.StatusReplicas != nil {
		replicas = *alpha.StatusReplicas
	}
	dst.Status = hub.SandboxStatus{
		ServiceFQDN:   in.Status.ServiceFQDN,
		Service:       in.Status.Service,
		Conditions:    in.Status.Conditions,
		Replicas:      replicas,
		LabelSelector: in.Status.LabelSelector,
		PodIPs:        in.Status.PodIPs,
	}
	beta := sandboxBetaState{Service: in.Spec.Service, NodeName: in.Status.NodeName}
	return convstate.Put(&dst.ObjectMeta, hub.SandboxConversionAnnotation, beta, beta != (sandboxBetaState{}))
}

// ConvertFrom converts the hub (v1alpha1) Sandbox to this v1beta1 one.
func (sb *Sandbox) ConvertFrom(srcRaw conversion.Hub) error {
	dst := sb
	in := srcRaw.(*hub.Sandbox).DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var beta sandboxBetaState
	convstate.Pop(&dst.ObjectMeta, hub.SandboxConversionAnnotation, &beta)
	dst.Spec = SandboxSpec{
		SandboxBlueprint: SandboxBlueprint{
			PodTemplate:          PodTemplateFromHub(in.Spec.PodTemplate),
			VolumeClaimTemplates: VolumeClaimTemplatesFromHub(in.Spec.VolumeClaimTemplates),
			Service:              beta.Service,
		},
		Lifecycle: Lifecycle{
			ShutdownTime:   in.Spec.ShutdownTime,
			ShutdownPolicy: (*ShutdownPolicy)(in.Spec.ShutdownPolicy),
		},
		OperatingMode: operatingModeFor(in.Spec.Replicas),
	}
	dst.Status = SandboxStatus{
		ServiceFQDN:   in.Status.ServiceFQDN,
		Service:       in.Status.Service,
		Conditions:    in.Status.Conditions,
		LabelSelector: in.Status.LabelSelector,
		PodIPs:        in.Status.PodIPs,
		NodeName:      beta.NodeName,
	}
	var alpha sandboxAlphaState
	if in.Status.Replicas != statusReplicas(dst.Status) {
		alpha.StatusReplicas = &in.Status.Replicas
	}
	return convstate.Put(&dst.ObjectMeta, hub.SandboxConversionAnnotation, alpha, alpha.StatusReplicas != nil)
}

// replicasFor maps operatingMode to v1alpha1 spec.replicas: Suspended is 0, Running 1, unset
// stays unset (the API server defaults both to running).
func replicasFor(mode SandboxOperatingMode) *int32 {
	var n int32
	switch mode {
	case "":
		return nil
	case SandboxOperatingModeSuspended:
		n = hub.PausedReplicas
	default:
		n = hub.RunningReplicas
	}
	return &n
}

// operatingModeFor is the inverse of replicasFor.
func operatingModeFor(replicas *int32) SandboxOperatingMode {
	switch {
	case replicas == nil:
		return ""
	case *replicas == hub.PausedReplicas:
		return SandboxOperatingModeSuspended
	default:
		return SandboxOperatingModeRunning
	}
}

// PodTemplateToHub converts a pod template to v1alpha1.
func PodTemplateToHub(in PodTemplate) hub.PodTemplate {
	return hub.PodTemplate{Spec: in.Spec, Metadata: hub.PodMetadata(in.ObjectMeta)}
}

// PodTemplateFromHub converts a v1alpha1 pod template.
func PodTemplateFromHub(in hub.PodTemplate) PodTemplate {
	return PodTemplate{Spec: in.Spec, ObjectMeta: PodMetadata(in.Metadata)}
}

// VolumeClaimTemplatesToHub converts volume claim templates to v1alpha1 (nil stays nil).
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

// VolumeClaimTemplatesFromHub converts v1alpha1 volume claim templates (nil stays nil).
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
