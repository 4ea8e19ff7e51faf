// Package index declares the cache field indexes the reconcilers share, so that finding a
// claim's Sandbox, a pool's members or a template's users is a map lookup, not a List.
package index

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

const (
	// SandboxControllerUID indexes Sandboxes by the UID of their controller (pool or claim).
	SandboxControllerUID = "metadata.controllerUID"
	// ClaimTemplate indexes SandboxClaims by spec.sandboxTemplateRef.name.
	ClaimTemplate = "spec.sandboxTemplateRef.name"
	// PoolTemplate indexes SandboxWarmPools by spec.sandboxTemplateRef.name.
	PoolTemplate = "spec.sandboxTemplateRef.name"
	// ClaimWarmPool indexes SandboxClaims by the one warm pool they name in spec.warmpool
	// (v1beta1's warmPoolRef); claims with "none" or "default" are not indexed.
	ClaimWarmPool = "spec.warmpool"
)

// IsClaimOrPool reports whether an owner reference names a SandboxClaim or SandboxWarmPool of
// our group. A UID alone is not enough: anyone may write a reference of another kind that carries
// a claim's UID (admission guards only references to our kinds).
func IsClaimOrPool(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == extv1beta1.GroupVersion.Group && (ref.Kind == "SandboxClaim" || ref.Kind == "SandboxWarmPool")
}

// Register adds every index to the manager's cache.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &agentsv1beta1.Sandbox{}, SandboxControllerUID, func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil && IsClaimOrPool(ref) {
			return []string{string(ref.UID)}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &extv1beta1.SandboxClaim{}, ClaimTemplate, func(o client.Object) []string {
		return []string{o.(*extv1beta1.SandboxClaim).TemplateName()}
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &extv1beta1.SandboxClaim{}, ClaimWarmPool, func(o client.Object) []string {
		switch p := o.(*extv1beta1.SandboxClaim).EffectiveWarmPool(); p {
		case extv1beta1.WarmPoolPolicyNone, extv1beta1.WarmPoolPolicyDefault:
			return nil
		default:
			return []string{string(p)}
		}
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &extv1beta1.SandboxWarmPool{}, PoolTemplate, func(o client.Object) []string {
		return []string{o.(*extv1beta1.SandboxWarmPool).Spec.TemplateRef.Name}
	})
}
