package sandboxclaim

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/metrics"
)

// awaitingReady is a claim this process bound and whose first Ready it has not recorded yet.
//
// A claim's startup is recorded exactly once without a write of its own (upstream stamps an
// annotation on the claim, a third write on the warm path): the entry is made where the claim
// gets its Sandbox, which happens once per claim, and consumed by the status write that first
// shows the claim Ready. Readiness that comes back later (a resume, a pod that recovers) finds
// no entry. The cost is the other way round: a claim bound before a controller restart and
// Ready after it is not recorded, where upstream's annotation would count it.
type awaitingReady struct {
	uid       types.UID
	launch    string
	firstSeen time.Time
	// For the first Ready's span (tracing.go): the pool, when the Sandbox was bound, and the
	// span of the pass that bound it (invalid when not traced).
	pool  string
	bound time.Time
	trace trace.SpanContext
}

// seen notes when this process first saw a claim that has no Sandbox yet.
func (r *Reconciler) seen(claim *extv1beta1.SandboxClaim) {
	if claim.Status.SandboxStatus.Name == "" {
		r.firstSeen.LoadOrStore(client.ObjectKeyFromObject(claim), r.clock.Now())
	}
}

// launched counts the Sandbox just handed to the claim and starts waiting for its first Ready.
func (r *Reconciler) launched(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, l launch) {
	metrics.RecordLaunch(metrics.Launch{
		Namespace: claim.Namespace, Template: claim.TemplateName(), Type: l.kind, WarmPool: l.pool,
		SandboxReady: meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady),
		CreatedBy:    claim.Labels[metrics.CreatedByLabel],
	})
	key := client.ObjectKeyFromObject(claim)
	entry := awaitingReady{uid: claim.UID, launch: l.kind, pool: l.pool, bound: r.clock.Now(),
		trace: trace.SpanContextFromContext(ctx)}
	if v, ok := r.firstSeen.LoadAndDelete(key); ok {
		entry.firstSeen = v.(time.Time)
	}
	r.awaitingReady.Store(key, &entry) // a pointer: the entry is not comparable, CompareAndDelete needs one
}

// observeFirstReady records the claim's startup latencies once the status that first shows it
// Ready is written.
func (r *Reconciler) observeFirstReady(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) {
	if sb == nil || !meta.IsStatusConditionTrue(claim.Status.Conditions, extv1beta1.ClaimConditionReady) {
		return
	}
	key := client.ObjectKeyFromObject(claim)
	v, ok := r.awaitingReady.Load(key)
	if !ok || v.(*awaitingReady).uid != claim.UID || !r.awaitingReady.CompareAndDelete(key, v) {
		return
	}
	entry := v.(*awaitingReady)
	f := metrics.FirstReady{
		LaunchType: entry.launch, Template: claim.TemplateName(), Now: r.clock.Now(),
		ClaimCreated: claim.CreationTimestamp.Time, FirstSeen: entry.firstSeen,
		ClientRequestedAt: claim.Annotations[metrics.ClientRequestedAtAnnotation],
		SandboxNamespace:  sb.Namespace, SandboxCreated: sb.CreationTimestamp.Time,
	}
	if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); c != nil {
		f.SandboxReady = c.LastTransitionTime.Time
	}
	metrics.RecordFirstReady(f)
	r.traceReady(ctx, claim, sb, entry)
}
