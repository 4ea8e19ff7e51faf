package sandboxclaim

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
)

// A claim's start is traced as the child of the trace its client put in the
// opentelemetry.io/trace-context annotation (upstream's clients do), or as a trace of its own,
// when the sampler takes it:
//
//	ReconcileSandboxClaim   each pass while the claim has no Sandbox or awaits its first Ready
//	├─ AcquireSandbox       adopting a warm Sandbox or creating a cold one
//	└─ SandboxClaimReady    from the Sandbox being handed over to the claim's first Ready
//
// Tracing writes nothing to the API: the annotation travels to the Sandbox in the write that
// binds it anyway (stampClaim), and what links the first Ready to the pass that bound the
// Sandbox stays in memory (awaitingReady). There is no admission span: claims are admitted by
// the API server's own validation, with no webhook of ours on the way.

// Span names, as upstream's where it has one.
const (
	spanReconcile = "ReconcileSandboxClaim"
	spanAcquire   = "AcquireSandbox"
	spanReady     = "SandboxClaimReady"
)

// noSpan is what the tracing steps hand out when there is nothing to trace.
var noSpan trace.Span = noop.Span{}

// traceReconcile opens the pass's span for a claim that is still starting; a claim that is
// running gets none, so that resyncs do not flood traces.
func (r *Reconciler) traceReconcile(ctx context.Context, claim *extv1beta1.SandboxClaim) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, noSpan
	}
	if _, awaiting := r.awaitingReady.Load(client.ObjectKeyFromObject(claim)); !awaiting && claim.Status.SandboxStatus.Name != "" {
		return ctx, noSpan
	}
	ctx, _ = tracing.FromAnnotations(ctx, claim.Annotations)
	return r.tracer.Start(ctx, spanReconcile, trace.WithAttributes(claimAttributes(claim)...))
}

// traceAcquire opens the span of acquire; endAcquire closes it with what was acquired.
func (r *Reconciler) traceAcquire(ctx context.Context, claim *extv1beta1.SandboxClaim) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noSpan
	}
	return r.tracer.Start(ctx, spanAcquire, trace.WithAttributes(claimAttributes(claim)...))
}

func endAcquire(ctx context.Context, span trace.Span, sb *agentsv1beta1.Sandbox, got launch, err error) {
	if span.IsRecording() {
		var uerr *userError
		switch {
		case errors.As(err, &uerr):
			span.SetStatus(codes.Error, uerr.reason)
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		default:
			launched := launchAttributes(sb, got)
			span.SetAttributes(launched...)
			trace.SpanFromContext(ctx).SetAttributes(launched...) // the pass's span too
		}
	}
	span.End()
}

// traceReady records the claim's first Ready: a span from the binding to now under the pass
// that bound the Sandbox (entry.trace), and an event on this pass's span.
func (r *Reconciler) traceReady(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, entry *awaitingReady) {
	if r.tracer == nil || !entry.trace.IsValid() {
		return
	}
	now := r.clock.Now()
	attrs := append(claimAttributes(claim), launchAttributes(sb, launch{kind: entry.launch, pool: entry.pool})...)
	_, span := r.tracer.Start(trace.ContextWithSpanContext(ctx, entry.trace), spanReady,
		trace.WithTimestamp(entry.bound), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(now))
	trace.SpanFromContext(ctx).AddEvent("Ready", trace.WithTimestamp(now))
}

func claimAttributes(claim *extv1beta1.SandboxClaim) []attribute.KeyValue {
	return []attribute.KeyValue{
		tracing.AttrClaimNamespace.String(claim.Namespace),
		tracing.AttrClaimName.String(claim.Name),
		tracing.AttrTemplate.String(claim.TemplateName()),
	}
}

func launchAttributes(sb *agentsv1beta1.Sandbox, got launch) []attribute.KeyValue {
	return []attribute.KeyValue{
		tracing.AttrLaunchType.String(got.kind),
		tracing.AttrWarmPool.String(got.pool),
		tracing.AttrSandboxName.String(sb.Name),
	}
}
