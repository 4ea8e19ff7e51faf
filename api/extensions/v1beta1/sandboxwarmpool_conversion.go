package v1beta1

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	hub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
)

// defaultPoolReplicas is spec.replicas of a v1beta1 pool that sets none (v1alpha1 requires it).
const defaultPoolReplicas int32 = 1

// poolBetaState is what a v1beta1 pool has and v1alpha1 lacks, kept on the stored object: the
// difference between an unset and a defaulted field, and status.observedGeneration.
type poolBetaState struct {
	ReplicasUnset      bool  `json:"replicasUnset,omitempty"`
	EmptyUpdateType    bool  `json:"emptyUpdateStrategy,omitempty"`
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ConvertTo converts this v1beta1 SandboxWarmPool to the hub (v1alpha1).
func (src *SandboxWarmPool) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*hub.SandboxWarmPool)
	in := src.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	convstate.Pop(&dst.ObjectMeta, hub.SandboxWarmPoolConversionAnnotation, &struct{}{})
	beta := poolBetaState{ObservedGeneration: in.Status.ObservedGeneration}
	replicas := defaultPoolReplicas
	if in.Spec.Replicas != nil {
		replicas = *in.Spec.Replicas
	} else {
		beta.ReplicasUnset = true
	}
	var strategy hub.SandboxWarmPoolUpdateStrategy
	if u := in.Spec.UpdateStrategy; u != nil {
		strategy.Type = hub.SandboxWarmPoolUpdateStrategyType(u.Type)
		beta.EmptyUpdateType = u.Type == ""
	}
	dst.Spec = hub.SandboxWarmPoolSpec{
		Replicas:       replicas,
		TemplateRef:    hub.SandboxTemplateRef(in.Spec.TemplateRef),
		UpdateStrategy: strategy,
	}
	dst.Status = hub.SandboxWarmPoolStatus{
		Replicas:      in.Status.Replicas,
		ReadyReplicas: in.Status.ReadyReplicas,
		Selector:      in.Status.Selector,
	}
	return convstate.Put(&dst.ObjectMeta, hub.SandboxWarmPoolConversionAnnotation, beta, beta != (poolBetaState{}))
}

// ConvertFrom converts the hub (v1alpha1) SandboxWarmPool to this v1beta1 one.
func (dst *SandboxWarmPool) ConvertFrom(srcRaw conversion.Hub) error {
	in := srcRaw.(*hub.SandboxWarmPool).DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var beta poolBetaState
	convstate.Pop(&dst.ObjectMeta, hub.SandboxWarmPoolConversionAnnotation, &beta)
	replicas := &in.Spec.Replicas
	if beta.ReplicasUnset && in.Spec.Replicas == defaultPoolReplicas {
		replicas = nil
	}
	var strategy *SandboxWarmPoolUpdateStrategy
	if t := in.Spec.UpdateStrategy.Type; t != "" || beta.EmptyUpdateType {
		strategy = &SandboxWarmPoolUpdateStrategy{Type: SandboxWarmPoolUpdateStrategyType(t)}
	}
	dst.Spec = SandboxWarmPoolSpec{
		Replicas:       replicas,
		TemplateRef:    SandboxTemplateRef(in.Spec.TemplateRef),
		UpdateStrategy: strategy,
	}
	dst.Status = SandboxWarmPoolStatus{
		Replicas:           in.Status.Replicas,
		ReadyReplicas:      in.Status.ReadyReplicas,
		Selector:           in.Status.Selector,
		ObservedGeneration: beta.ObservedGeneration,
	}
	return nil
}
