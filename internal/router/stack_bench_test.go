package router

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// benchStack runs the proxy port's handler stack around a proxy stand-in that answers at once:
// what the router's own layers (health shortcut, tracing, metrics, guard) cost per request.
func benchStack(b *testing.B, o HandlerOptions) {
	o.Proxy = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := NewHandler(o)
	req := httptest.NewRequest("GET", "/x", nil)
	req.Header.Set(HeaderSandboxID, "sb")
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

func BenchmarkHandlerStack(b *testing.B) {
	benchStack(b, HandlerOptions{Metrics: NewMetrics(nil)})
}

// BenchmarkHandlerStackTraced is the same with tracing on: every request sampled, spans batched
// to an exporter that drops them.
func BenchmarkHandlerStackTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	benchStack(b, HandlerOptions{Metrics: NewMetrics(nil), TracerProvider: tp})
}
