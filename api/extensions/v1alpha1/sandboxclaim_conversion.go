package v1alpha1

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	hub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentshub "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// claimBetaState is what a v1beta1 claim has and v1alpha1 lacks, kept on the served v1alpha1
// object. What v1alpha1 has and v1beta1 lacks (its template and warmpool) rides on the stored
// object as a hub.PoolSelection, which the claim controller reads (hub.SandboxClaim.PoolSelection).
type claimBetaState struct {
	// WarmPoolRef is kept only when the v1alpha1 fields cannot give it back.
	WarmPoolRef          *string                                   `json:"warmPoolRef,omitempty"`
	VolumeClaimTemplates []agentshub.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
}

func (s *WarmPoolPolicy) toHub() *hub.WarmPoolPolicy { return (*hub.WarmPoolPolicy)(s) }

// ConvertTo converts this v1alpha1 SandboxClaim to the hub (v1beta1, the storage version).
func (c *SandboxClaim) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*hub.SandboxClaim)
	in := c.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var beta claimBetaState
	convstate.Pop(&dst.ObjectMeta, SandboxClaimConversionAnnotation, &beta)
	sel := hub.PoolSelection{Template: in.Spec.TemplateRef.Name, WarmPool: in.Spec.WarmPool.toHub()}
	ref := sel.WarmPoolRef()
	if beta.WarmPoolRef != nil && hub.SelectionOf(*beta.WarmPoolRef).Equal(sel) {
		ref = *beta.WarmPoolRef
	}
	dst.Spec = hub.SandboxClaimSpec{
		WarmPoolRef:           hub.SandboxWarmPoolRef{Name: ref},
		Lifecycle:             lifecycleToHub(in.Spec.Lifecycle),
		AdditionalPodMetadata: agentshub.PodMetadata(in.Spec.AdditionalPodMetadata),
		Env:                   envToHub(in.Spec.Env),
		VolumeClaimTemplates:  beta.VolumeClaimTemplates,
	}
	dst.Status = hub.SandboxClaimStatus{
		Conditions:    in.Status.Conditions,
		SandboxStatus: hub.SandboxStatus(in.Status.SandboxStatus),
	}
	keep := !hub.SelectionOf(ref).Equal(sel)
	return convstate.Put(&dst.ObjectMeta, SandboxClaimConversionAnnotation, sel, keep)
}

// ConvertFrom converts the hub (v1beta1) SandboxClaim to this v1alpha1 one.
func (c *SandboxClaim) ConvertFrom(srcRaw conversion.Hub) error {
	dst := c
	in := srcRaw.(*hub.SandboxClaim).DeepCopy()
	ref := in.Spec.WarmPoolRef.Name
	sel := in.PoolSelection()
	dst.ObjectMeta = in.ObjectMeta
	convstate.Pop(&dst.ObjectMeta, SandboxClaimConversionAnnotation, &hub.PoolSelection{})
	dst.Spec = SandboxClaimSpec{
		TemplateRef:           SandboxTemplateRef{Name: sel.Template},
		Lifecycle:             lifecycleFromHub(in.Spec.Lifecycle),
		WarmPool:              (*WarmPoolPolicy)(sel.WarmPool),
		AdditionalPodMetadata: agentsv1alpha1.PodMetadata(in.Spec.AdditionalPodMetadata),
		Env:                   envFromHub(in.Spec.Env),
	}
	dst.Status = SandboxClaimStatus{
		Conditions:    in.Status.Conditions,
		SandboxStatus: SandboxStatus(in.Status.SandboxStatus),
	}
	beta := claimBetaState{VolumeClaimTemplates: in.Spec.VolumeClaimTemplates}
	if sel.WarmPoolRef() != ref {
		beta.WarmPoolRef = &ref
	}
	keep := beta.WarmPoolRef != nil || beta.VolumeClaimTemplates != nil
	return convstate.Put(&dst.ObjectMeta, SandboxClaimConversionAnnotation, beta, keep)
}

func envToHub(in []EnvVar) []hub.EnvVar {
	if in == nil {
		return nil
	}
	out := make([]hub.EnvVar, len(in))
	for i, e := range in {
		out[i] = hub.EnvVar(e)
	}
	return out
}

func envFromHub(in []hub.EnvVar) []EnvVar {
	if in == nil {
		return nil
	}
	out := make([]EnvVar, len(in))
	for i, e := range in {
		out[i] = EnvVar(e)
	}
	return out
}

func lifecycleToHub(in *Lifecycle) *hub.Lifecycle {
	if in == nil {
		return nil
	}
	return &hub.Lifecycle{
		ShutdownTime:            in.ShutdownTime,
		TTLSecondsAfterFinished: in.TTLSecondsAfterFinished,
		ShutdownPolicy:          hub.ShutdownPolicy(in.ShutdownPolicy),
	}
}

func lifecycleFromHub(in *hub.Lifecycle) *Lifecycle {
	if in == nil {
		return nil
	}
	return &Lifecycle{
		ShutdownTime:            in.ShutdownTime,
		TTLSecondsAfterFinished: in.TTLSecondsAfterFinished,
		ShutdownPolicy:          ShutdownPolicy(in.ShutdownPolicy),
	}
}
