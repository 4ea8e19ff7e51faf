package sandboxclaim

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
)

// countServed tells the autoscaler a claim was served from pool.
func (r *Reconciler) countServed(namespace, pool string) {
	r.demand.Record(types.NamespacedName{Namespace: namespace, Name: pool})
}

// countMissed tells the autoscaler a claim that a pool could have served found no ready member:
// the pool the claim names, or else every autoscaled pool of its template (read from the
// cache's index, on the cold path only). Without it an idle pool scaled to zero would never see
// a claim again.
func (r *Reconciler) countMissed(ctx context.Context, claim *extv1beta1.SandboxClaim, template string) {
	if r.demand == nil {
		return
	}
	if pool := namedPool(claim); pool != "" {
		r.countServed(claim.Namespace, pool)
		return
	}
	pools := &extv1beta1.SandboxWarmPoolList{}
	if err := r.client.List(ctx, pools, client.InNamespace(claim.Namespace), client.MatchingFields{index.PoolTemplate: template}); err != nil {
		return
	}
	for i := range pools.Items {
		if pools.Items[i].Spec.Autoscaling != nil {
			r.countServed(claim.Namespace, pools.Items[i].Name)
		}
	}
}
