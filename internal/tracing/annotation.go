package tracing

import (
	"context"
	"encoding/json"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TraceContextAnnotation carries a client's trace into the controller, on a SandboxClaim (and,
// copied by the claim controller in the write that binds it, its Sandbox). Its value is what
// upstream agent-sandbox's Go and Python clients write: the W3C headers as a JSON object,
// {"traceparent": "00-<trace id>-<span id>-<flags>"} with "tracestate" when there is one.
const TraceContextAnnotation = "opentelemetry.io/trace-context"

// Span attribute keys, in upstream agent-sandbox's sandbox.* namespace.
const (
	AttrClaimNamespace   = attribute.Key("sandbox.claim.namespace")
	AttrClaimName        = attribute.Key("sandbox.claim.name")
	AttrSandboxName      = attribute.Key("sandbox.name")
	AttrSandboxID        = attribute.Key("sandbox.id") // the router's X-Sandbox-ID
	AttrSandboxNamespace = attribute.Key("sandbox.namespace")
	AttrSandboxPort      = attribute.Key("sandbox.port")
	AttrTemplate         = attribute.Key("sandbox.template")
	AttrWarmPool         = attribute.Key("sandbox.warm_pool")
	AttrLaunchType       = attribute.Key("sandbox.launch_type") // warm or cold
)

// FromAnnotations returns ctx with the remote span context the annotations carry as its
// parent, and whether there was one. A missing, unreadable or invalid annotation leaves ctx as
// it is: a client's bad annotation must never fail a reconcile.
func FromAnnotations(ctx context.Context, annotations map[string]string) (context.Context, bool) {
	v := annotations[TraceContextAnnotation]
	if v == "" {
		return ctx, false
	}
	carrier := propagation.MapCarrier{}
	if strings.HasPrefix(v, "{") {
		if json.Unmarshal([]byte(v), (*map[string]string)(&carrier)) != nil {
			return ctx, false
		}
	} else {
		carrier["traceparent"] = v // a bare traceparent, as a hand-written annotation may be
	}
	out := Propagator.Extract(ctx, carrier)
	return out, trace.SpanContextFromContext(out).IsRemote()
}

// AnnotationValue encodes ctx's span context as upstream's clients do; "" without one.
func AnnotationValue(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	Propagator.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return ""
	}
	b, _ := json.Marshal(map[string]string(carrier)) // a map of strings always encodes
	return string(b)
}
