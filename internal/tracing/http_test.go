package tracing_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
)

func TestHTTPMethodKeepsOnlyStandardMethods(t *testing.T) {
	tests := []struct{ in, want string }{
		{http.MethodGet, "GET"},
		{http.MethodTrace, "TRACE"},
		{"PROPFIND", "_OTHER"},
		{"get", "_OTHER"},
		{"", "_OTHER"},
	}
	for _, tt := range tests {
		if got := tracing.HTTPMethod(tt.in); got != tt.want {
			t.Errorf("HTTPMethod(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEndHTTPServerSpanRecordsTheStatus(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		wantCode   int64
		wantStatus codes.Code
	}{
		{"nothing written: the implicit 200", 0, 200, codes.Unset},
		{"a client error is not the server's", http.StatusNotFound, 404, codes.Unset},
		{"a server error marks the span", http.StatusBadGateway, 502, codes.Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			_, span := tp.Tracer("test").Start(context.Background(), "GET /")
			tracing.EndHTTPServerSpan(span, tt.status)
			ended := rec.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans ended, want the one", len(ended))
			}
			var code attribute.Value
			for _, kv := range ended[0].Attributes() {
				if kv.Key == "http.status_code" {
					code = kv.Value
				}
			}
			if code.AsInt64() != tt.wantCode {
				t.Errorf("http.status_code = %v, want %d", code.Emit(), tt.wantCode)
			}
			if got := ended[0].Status().Code; got != tt.wantStatus {
				t.Errorf("span status = %v, want %v", got, tt.wantStatus)
			}
		})
	}
}
