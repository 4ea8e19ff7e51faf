package v1beta1

import (
	"strings"

	"github.com/agent-sandbox/agent-sandbox/api/internal/convstate"
)

// ShadowPoolPrefix is how a v1alpha1 claim that names no specific warm pool ("default" or
// "none") appears in v1beta1, whose warmPoolRef is required: warmPoolRef.name = ShadowPoolPrefix +
// template name. Upstream agent-sandbox's own conversion and migration use the same convention.
const ShadowPoolPrefix = "shadow-pool-"

// WarmPoolPolicy is v1alpha1's spec.warmpool: "none", "default" (any pool of the template) or
// the name of one pool.
type WarmPoolPolicy string

const (
	// WarmPoolPolicyNone: no warm pool; a fresh sandbox is always created.
	WarmPoolPolicyNone WarmPoolPolicy = "none"
	// WarmPoolPolicyDefault: any warm pool of the claim's template.
	WarmPoolPolicyDefault WarmPoolPolicy = "default"
)

// PoolSelection is how v1alpha1 says which pool and template serve a claim
// (spec.sandboxTemplateRef.name and spec.warmpool); v1beta1 says it with warmPoolRef alone.
type PoolSelection struct {
	Template string          `json:"sandboxTemplateRef"`
	WarmPool *WarmPoolPolicy `json:"warmpool,omitempty"`
}

// Equal reports whether two selections are the same, an unset warmpool differing from "default".
func (p PoolSelection) Equal(o PoolSelection) bool {
	if p.Template != o.Template || (p.WarmPool == nil) != (o.WarmPool == nil) {
		return false
	}
	return p.WarmPool == nil || *p.WarmPool == *o.WarmPool
}

// WarmPoolRef maps the selection to a v1beta1 warmPoolRef name: a named pool is itself;
// "default", "none" or unset become ShadowPoolPrefix + template (upstream's convention).
func (p PoolSelection) WarmPoolRef() string {
	if p.WarmPool != nil {
		switch *p.WarmPool {
		case "", WarmPoolPolicyDefault, WarmPoolPolicyNone:
		default:
			return string(*p.WarmPool)
		}
	}
	return ShadowPoolPrefix + p.Template
}

// Effective returns the selection's warmpool with its default ("default") applied.
func (p PoolSelection) Effective() WarmPoolPolicy {
	if p.WarmPool == nil || *p.WarmPool == "" {
		return WarmPoolPolicyDefault
	}
	return *p.WarmPool
}

// SelectionOf maps a v1beta1 warmPoolRef to a v1alpha1 selection: a shadow pool means any pool
// of its template; any other name selects that pool, with the template left empty: the claim
// controller then uses the pool's template.
func SelectionOf(ref string) PoolSelection {
	if tmpl, ok := strings.CutPrefix(ref, ShadowPoolPrefix); ok {
		policy := WarmPoolPolicyDefault
		return PoolSelection{Template: tmpl, WarmPool: &policy}
	}
	policy := WarmPoolPolicy(ref)
	return PoolSelection{WarmPool: &policy}
}

// SelectionFrom is the selection of a claim whose warmPoolRef is ref and whose annotations are
// annotations: the v1alpha1 fields it was written with, kept in SandboxClaimConversionAnnotation
// when ref alone cannot give them back (e.g. warmpool "none", or a template and a pool both
// named), as long as they still name ref; else SelectionOf(ref).
func SelectionFrom(annotations map[string]string, ref string) PoolSelection {
	var saved PoolSelection
	if convstate.Peek(annotations, SandboxClaimConversionAnnotation, &saved) && saved.WarmPoolRef() == ref {
		return saved
	}
	return SelectionOf(ref)
}

// PoolSelection is the claim's selection as v1alpha1 states it (see SelectionFrom).
func (c *SandboxClaim) PoolSelection() PoolSelection {
	return SelectionFrom(c.Annotations, c.Spec.WarmPoolRef.Name)
}

// TemplateName is the template the claim names itself (v1alpha1's spec.sandboxTemplateRef), empty
// when it names only a pool: then the pool's template serves it.
func (c *SandboxClaim) TemplateName() string {
	return c.PoolSelection().Template
}

// EffectiveWarmPool returns the claim's v1alpha1 spec.warmpool with its default applied.
func (c *SandboxClaim) EffectiveWarmPool() WarmPoolPolicy {
	return c.PoolSelection().Effective()
}
