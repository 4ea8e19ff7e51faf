package v1alpha1

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	hub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
)

// defaultPoolReplicas is spec.replicas of a v1beta1 pool that sets none (v1alpha1 requires it).
const defaultPoolReplicas int32 = 1

// poolBetaState is what a v1beta1 pool has and v1alpha1 lacks, kept on the served v1alpha1
// object: the difference between an unset and a defaulted field.
type poolBetaState struct {
	ReplicasUnset   bool `json:"replicasUnset,omitempty"`
	EmptyUpdateType bool `json:"emptyUpdateStrategy,omitempty"`
}

// ConvertTo converts this v1alpha1 SandboxWarmPool to the hub (v1beta1, the storage version).
func (p *SandboxWarmPool) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*hub.SandboxWarmPool)
	in := p.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var beta poolBetaState
	convstate.Pop(&dst.ObjectMeta, SandboxWarmPoolConversionAnnotation, &beta)
	replicas := &in.Spec.Replicas
	if beta.ReplicasUnset && in.Spec.Replicas == defaultPoolReplicas {
		replicas = nil
	}
	var strategy *hub.SandboxWarmPoolUpdateStrategy
	if t := in.Spec.UpdateStrategy.Type; t != "" || beta.EmptyUpdateType {
		strategy = &hub.SandboxWarmPoolUpdateStrategy{Type: hub.SandboxWarmPoolUpdateStrategyType(t)}
	}
	dst.Spec = hub.SandboxWarmPoolSpec{
		Replicas:       replicas,
		TemplateRef:    hub.SandboxTemplateRef(in.Spec.TemplateRef),
		UpdateStrategy: strategy,
		// The same fields in both versions: a conversion of the struct type.
		Autoscaling: (*hub.SandboxWarmPoolAutoscaling)(in.Spec.Autoscaling),
	}
	dst.Status = hub.SandboxWarmPoolStatus{
		Replicas:           in.Status.Replicas,
		ReadyReplicas:      in.Status.ReadyReplicas,
		Selector:           in.Status.Selector,
		ObservedGeneration: in.Status.ObservedGeneration,
		Conditions:         in.Status.Conditions,
		Autoscaling:        (*hub.SandboxWarmPoolAutoscalingStatus)(in.Status.Autoscaling),
	}
	return nil
}

// ConvertFrom converts the hub (v1beta1) SandboxWarmPool to this v1alpha1 one.
func (p *SandboxWarmPool) ConvertFrom(srcRaw conversion.Hub) error {
	dst := p
	in := srcRaw.(*hub.SandboxWarmPool).DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	// v1beta1 holds everything v1alpha1 has; drop a stale annotation all the same.
	convstate.Pop(&dst.ObjectMeta, SandboxWarmPoolConversionAnnotation, &struct{}{})
	var beta poolBetaState
	replicas := defaultPoolReplicas
	if in.Spec.Replicas != nil {
		replicas = *in.Spec.Replicas
	} else {
		beta.ReplicasUnset = true
	}
	var strategy SandboxWarmPoolUpdateStrategy
	if u := in.Spec.UpdateStrategy; u != nil {
		strategy.Type = SandboxWarmPoolUpdateStrategyType(u.Type)
		beta.EmptyUpdateType = u.Type == ""
	}
	dst.Spec = SandboxWarmPoolSpec{
		Replicas:       replicas,
		TemplateRef:    SandboxTemplateRef(in.Spec.TemplateRef),
		UpdateStrategy: strategy,
		Autoscaling:    (*SandboxWarmPoolAutoscaling)(in.Spec.Autoscaling),
	}
	dst.Status = SandboxWarmPoolStatus{
		Replicas:           in.Status.Replicas,
		ReadyReplicas:      in.Status.ReadyReplicas,
		Selector:           in.Status.Selector,
		ObservedGeneration: in.Status.ObservedGeneration,
		Conditions:         in.Status.Conditions,
		Autoscaling:        (*SandboxWarmPoolAutoscalingStatus)(in.Status.Autoscaling),
	}
	return convstate.Put(&dst.ObjectMeta, SandboxWarmPoolConversionAnnotation, beta, beta != (poolBetaState{}))
}
