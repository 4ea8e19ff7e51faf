package v1beta1

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	hub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
	agentshub "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// claimBetaState is what a v1beta1 claim has and v1alpha1 lacks, kept on the stored object.
type claimBetaState struct {
	// WarmPoolRef is kept only when the v1alpha1 fields cannot give it back.
	WarmPoolRef          *string                                       `json:"warmPoolRef,omitempty"`
	VolumeClaimTemplates []agentsv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
}

// claimAlphaState is what a v1alpha1 claim has and v1beta1 lacks, kept on the served object
// when warmPoolRef alone cannot give it back.
type claimAlphaState struct {
	Template string              `json:"sandboxTemplateRef"`
	WarmPool *hub.WarmPoolPolicy `json:"warmpool,omitempty"`
}

// poolSelection is how v1alpha1 says which pool and template serve a claim.
type poolSelection struct {
	template string
	warmPool *hub.WarmPoolPolicy
}

func (p poolSelection) equal(o poolSelection) bool {
	if p.template != o.template || (p.warmPool == nil) != (o.warmPool == nil) {
		return false
	}
	return p.warmPool == nil || *p.warmPool == *o.warmPool
}

// warmPoolRefOf maps the v1alpha1 selection to a v1beta1 warmPoolRef: a named pool is itself;
// "default", "none" or unset become ShadowPoolPrefix + template (upstream's convention).
func warmPoolRefOf(p poolSelection) string {
	if p.warmPool != nil {
		switch *p.warmPool {
		case "", hub.WarmPoolPolicyDefault, hub.WarmPoolPolicyNone:
		default:
			return string(*p.warmPool)
		}
	}
	return hub.ShadowPoolPrefix + p.template
}

// selectionOf maps a v1beta1 warmPoolRef to v1alpha1: a shadow pool means any pool of its
// template; any other name selects that pool, with the template left empty: the claim
// controller then uses the pool's template.
func selectionOf(ref string) poolSelection {
	if tmpl, ok := strings.CutPrefix(ref, hub.ShadowPoolPrefix); ok {
		policy := hub.WarmPoolPolicyDefault
		return poolSelection{template: tmpl, warmPool: &policy}
	}
	policy := hub.WarmPoolPolicy(ref)
	return poolSelection{warmPool: &policy}
}

// ConvertTo converts this v1beta1 SandboxClaim to the hub (v1alpha1).
func (c *SandboxClaim) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*hub.SandboxClaim)
	in := c.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var alpha claimAlphaState
	found := convstate.Pop(&dst.ObjectMeta, hub.SandboxClaimConversionAnnotation, &alpha)
	sel := selectionOf(in.Spec.WarmPoolRef.Name)
	if saved := (poolSelection{alpha.Template, alpha.WarmPool}); found && warmPoolRefOf(saved) == in.Spec.WarmPoolRef.Name {
		sel = saved // the v1alpha1 fields it came from, still naming the same pool
	}
	dst.Spec = hub.SandboxClaimSpec{
		TemplateRef:           hub.SandboxTemplateRef{Name: sel.template},
		Lifecycle:             lifecycleToHub(in.Spec.Lifecycle),
		WarmPool:              sel.warmPool,
		AdditionalPodMetadata: agentshub.PodMetadata(in.Spec.AdditionalPodMetadata),
		Env:                   envToHub(in.Spec.Env),
	}
	dst.Status = hub.SandboxClaimStatus{
		Conditions:    in.Status.Conditions,
		SandboxStatus: hub.SandboxStatus(in.Status.SandboxStatus),
	}
	beta := claimBetaState{VolumeClaimTemplates: in.Spec.VolumeClaimTemplates}
	if warmPoolRefOf(sel) != in.Spec.WarmPoolRef.Name {
		beta.WarmPoolRef = &in.Spec.WarmPoolRef.Name
	}
	keep := beta.WarmPoolRef != nil || beta.VolumeClaimTemplates != nil
	return convstate.Put(&dst.ObjectMeta, hub.SandboxClaimConversionAnnotation, beta, keep)
}

// ConvertFrom converts the hub (v1alpha1) SandboxClaim to this v1beta1 one.
func (c *SandboxClaim) ConvertFrom(srcRaw conversion.Hub) error {
	dst := c
	in := srcRaw.(*hub.SandboxClaim).DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var beta claimBetaState
	convstate.Pop(&dst.ObjectMeta, hub.SandboxClaimConversionAnnotation, &beta)
	sel := poolSelection{template: in.Spec.TemplateRef.Name, warmPool: in.Spec.WarmPool}
	ref := warmPoolRefOf(sel)
	if beta.WarmPoolRef != nil && selectionOf(*beta.WarmPoolRef).equal(sel) {
		ref = *beta.WarmPoolRef
	}
	dst.Spec = SandboxClaimSpec{
		WarmPoolRef:           SandboxWarmPoolRef{Name: ref},
		Lifecycle:             lifecycleFromHub(in.Spec.Lifecycle),
		AdditionalPodMetadata: agentsv1beta1.PodMetadata(in.Spec.AdditionalPodMetadata),
		Env:                   envFromHub(in.Spec.Env),
		VolumeClaimTemplates:  beta.VolumeClaimTemplates,
	}
	dst.Status = SandboxClaimStatus{
		Conditions:    in.Status.Conditions,
		SandboxStatus: SandboxStatus(in.Status.SandboxStatus),
	}
	keep := !selectionOf(ref).equal(sel)
	alpha := claimAlphaState{Template: sel.template, WarmPool: sel.warmPool}
	return convstate.Put(&dst.ObjectMeta, hub.SandboxClaimConversionAnnotation, alpha, keep)
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
