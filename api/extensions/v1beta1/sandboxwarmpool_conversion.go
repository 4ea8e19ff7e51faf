package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	hub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
)

// defaultPoolReplicas is spec.replicas of a v1beta1 pool that sets none (v1alpha1 requires it).
const defaultPoolReplicas int32 = 1

// poolBetaState is what a v1beta1 pool has and v1alpha1 lacks, kept on the stored object: the
// difference between an unset and a defaulted field.
type poolBetaState struct {
	ReplicasUnset   bool `json:"replicasUnset,omitempty"`
	EmptyUpdateType bool `json:"emptyUpdateStrategy,omitempty"`
}

// poolAlphaState is what a v1alpha1 pool has and v1beta1 lacks, kept on the served object:
// status.conditions.
type poolAlphaState struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConvertTo converts this v1beta1 SandboxWarmPool to the hub (v1alpha1).
func (p *SandboxWarmPool) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*hub.SandboxWarmPool)
	in := p.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var alpha poolAlphaState
	convstate.Pop(&dst.ObjectMeta, hub.SandboxWarmPoolConversionAnnotation, &alpha)
	var beta poolBetaState
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
		Replicas:           in.Status.Replicas,
		ReadyReplicas:      in.Status.ReadyReplicas,
		Selector:           in.Status.Selector,
		ObservedGeneration: in.Status.ObservedGeneration,
		Conditions:         alpha.Conditions,
	}
	return convstate.Put(&dst.ObjectMeta, hub.SandboxWarmPoolConversionAnnotation, beta, beta != (poolBetaState{}))
}

// ConvertFrom converts the hub (v1alpha1) SandboxWarmPool to this v1beta1 one.
func (p *SandboxWarmPool) ConvertFrom(srcRaw conversion.Hub) error {
	dst := p
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
		ObservedGeneration: in.Status.ObservedGeneration,
	}
	alpha := poolAlphaState{Conditions: in.Status.Conditions}
	return convstate.Put(&dst.ObjectMeta, hub.SandboxWarmPoolConversionAnnotation, alpha, len(alpha.Conditions) > 0)
}
