package sandboxd

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
)

// Every request and every gRPC call is a server span, the child of the traceparent it came with
// (the router's span, or the client's when the router does not trace). Without a recording
// provider (Config.TracerProvider) nothing here runs.

// ServeHTTP serves one request, in a span when tracing is on. gRPC calls on the HTTP port are
// traced by the gRPC server's interceptor instead.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.tracer == nil || isGRPC(r.ProtoMajor, r.Header.Get("Content-Type")) {
		s.serveRequest(w, r)
		return
	}
	route := "unmatched"
	if rt, _, _ := s.match(r); rt != nil {
		route = rt.name // the pattern, never the path: names stay few, and paths stay private
	}
	ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	method := tracing.HTTPMethod(r.Method)
	ctx, span := s.tracer.Start(ctx, method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.method", method), attribute.String("http.route", route)))
	sw := &statusWriter{ResponseWriter: w}
	defer func() { tracing.EndHTTPServerSpan(span, sw.status) }()
	s.serveRequest(sw, r.WithContext(ctx))
}

// grpcTraceUnary and grpcTraceStream run first in the chain, so refused calls are traced too.
func (s *Server) grpcTraceUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, span := s.startRPC(ctx, info.FullMethod)
	resp, err := h(ctx, req)
	endRPC(span, err)
	return resp, err
}

func (s *Server) grpcTraceStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, span := s.startRPC(ss.Context(), info.FullMethod)
	err := h(srv, &tracedStream{ServerStream: ss, ctx: ctx})
	endRPC(span, err)
	return err
}

func (s *Server) startRPC(ctx context.Context, fullMethod string) (context.Context, trace.Span) {
	md, _ := metadata.FromIncomingContext(ctx)
	ctx = tracing.Propagator.Extract(ctx, metadataCarrier(md))
	name := strings.TrimPrefix(fullMethod, "/")
	service, method, _ := strings.Cut(name, "/")
	return s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("rpc.system", "grpc"), attribute.String("rpc.service", service), attribute.String("rpc.method", method)))
}

func endRPC(span trace.Span, err error) {
	code := status.Code(err)
	span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
	if err != nil {
		span.SetStatus(otelcodes.Error, code.String())
	}
	span.End()
}

// tracedStream hands the handler the context that holds the call's span.
type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (t *tracedStream) Context() context.Context { return t.ctx }

// metadataCarrier reads trace headers from gRPC metadata (whose keys are lower case, as the
// propagator asks for them).
type metadataCarrier metadata.MD

func (m metadataCarrier) Get(key string) string {
	if v := metadata.MD(m).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (m metadataCarrier) Set(key, value string) { metadata.MD(m).Set(key, value) }

func (m metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
