package router

import (
	"net/http"
	"net/http/httputil"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
)

// traced opens a server span per request, continuing the client's W3C traceparent when it sent
// one; the proxy's rewrite passes the span on to the sandbox (tracedRewrite). Without a recording
// provider it returns next itself: the request path does no tracing work at all, and a client's
// traceparent reaches the sandbox as it was sent.
//
// Trace headers decide nothing here but which trace a span joins: routing, authentication and
// authorization never read them.
func traced(tp trace.TracerProvider, next http.Handler) http.Handler {
	tracer := tracing.Tracer(tp, "router")
	if tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		// Upstream's span name and attributes, so that its dashboards carry over.
		ctx, span := tracer.Start(ctx, "HTTP "+tracing.HTTPMethod(r.Method), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.method", tracing.HTTPMethod(r.Method)),
				attribute.String("http.target", clip(r.URL.Path, maxPathAttr)),
				tracing.AttrSandboxID.String(clip(r.Header.Get(HeaderSandboxID), maxNameAttr)),
				tracing.AttrSandboxNamespace.String(clip(r.Header.Get(HeaderSandboxNamespace), maxNameAttr)),
				tracing.AttrSandboxPort.String(clip(r.Header.Get(HeaderSandboxPort), maxNameAttr)),
			))
		sw := &statusWriter{ResponseWriter: w}
		// Deferred so that a stream aborted with http.ErrAbortHandler still ends its span.
		defer func() { tracing.EndHTTPServerSpan(span, sw.status) }()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// tracedRewrite also sets the outbound request's traceparent (and tracestate) to the router's
// span, when tp records; otherwise it is rewrite itself.
func tracedRewrite(tp trace.TracerProvider, rewrite func(*httputil.ProxyRequest)) func(*httputil.ProxyRequest) {
	if !tracing.Enabled(tp) {
		return rewrite
	}
	return func(pr *httputil.ProxyRequest) {
		rewrite(pr)
		tracing.Propagator.Inject(pr.Out.Context(), propagation.HeaderCarrier(pr.Out.Header))
	}
}

// Bounds of attribute values taken from the request: a client must not fill span storage.
const (
	maxNameAttr = 253 // a DNS subdomain, the longest Kubernetes name
	maxPathAttr = 1024
)

// clip also mends invalid UTF-8 (a path may hold any byte): OTLP's protobuf refuses it, and
// one such span would fail the export of its whole batch.
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
