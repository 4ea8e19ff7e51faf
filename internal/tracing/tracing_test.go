package tracing_test

import (
	"context"
	"os"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing/tracingtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	spanID      = "00f067aa0ba902b7"
	traceparent = "00-" + traceID + "-" + spanID + "-01"
)

func TestFromAnnotationsReadsWhatUpstreamClientsWrite(t *testing.T) {
	cases := []struct {
		name       string
		annotation string // "" for none
		wantParent bool
		wantState  string
	}{
		{name: "upstream Go client (encoding/json)", annotation: `{"traceparent":"` + traceparent + `"}`, wantParent: true},
		{name: "upstream Python client (json.dumps)", annotation: `{"traceparent": "` + traceparent + `"}`, wantParent: true},
		{name: "with tracestate", annotation: `{"traceparent":"` + traceparent + `","tracestate":"vendor=abc"}`, wantParent: true, wantState: "vendor=abc"},
		{name: "a bare traceparent", annotation: traceparent, wantParent: true},
		{name: "no annotation"},
		{name: "not JSON", annotation: `{"traceparent":`},
		{name: "JSON of another shape", annotation: `{"traceparent":["x"]}`},
		{name: "an invalid traceparent", annotation: `{"traceparent":"00-00000000000000000000000000000000-` + spanID + `-01"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			annotations := map[string]string{"other": "x"}
			if tc.annotation != "" {
				annotations[tracing.TraceContextAnnotation] = tc.annotation
			}
			ctx, ok := tracing.FromAnnotations(context.Background(), annotations)
			sc := trace.SpanContextFromContext(ctx)
			if ok != tc.wantParent || sc.IsValid() != tc.wantParent {
				t.Fatalf("FromAnnotations(%q) = parent %v (span context valid %v), want %v", tc.annotation, ok, sc.IsValid(), tc.wantParent)
			}
			if !tc.wantParent {
				return
			}
			if sc.TraceID().String() != traceID || sc.SpanID().String() != spanID || !sc.IsSampled() || !sc.IsRemote() {
				t.Errorf("parent = %s/%s sampled %v remote %v, want %s/%s sampled, remote",
					sc.TraceID(), sc.SpanID(), sc.IsSampled(), sc.IsRemote(), traceID, spanID)
			}
			if got := sc.TraceState().String(); got != tc.wantState {
				t.Errorf("tracestate = %q, want %q", got, tc.wantState)
			}
		})
	}
}

func TestAnnotationValueIsUpstreamsFormat(t *testing.T) {
	ctx, ok := tracing.FromAnnotations(context.Background(), map[string]string{tracing.TraceContextAnnotation: traceparent})
	if !ok {
		t.Fatal("test setup: the bare traceparent was not read")
	}
	if got, want := tracing.AnnotationValue(ctx), `{"traceparent":"`+traceparent+`"}`; got != want {
		t.Errorf("AnnotationValue = %s, want %s", got, want)
	}
	if got := tracing.AnnotationValue(context.Background()); got != "" {
		t.Errorf("AnnotationValue without a span = %q, want empty", got)
	}
}

func TestSetupFollowsTheEnvironment(t *testing.T) {
	cases := []struct {
		name        string
		env         map[string]string
		wantEnabled bool
		wantErr     bool
	}{
		{name: "no endpoint"},
		{name: "an endpoint", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:1"}, wantEnabled: true},
		{name: "a traces endpoint", env: map[string]string{tracing.EnvTracesEndpoint: "http://127.0.0.1:1/v1/traces"}, wantEnabled: true},
		{name: "grpc", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:1", tracing.EnvProtocol: "grpc"}, wantEnabled: true},
		{name: "the SDK disabled", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:1", tracing.EnvSDKDisabled: "true"}},
		{name: "exporter none", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:1", tracing.EnvTracesExporter: "none"}},
		{name: "an exporter we lack", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:1", tracing.EnvTracesExporter: "zipkin"}, wantErr: true},
		{name: "a protocol we lack", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:1", tracing.EnvProtocol: "http/json"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tp, shutdown, err := tracing.Setup(context.Background(), "test", nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Setup error = %v, want error %v", err, tc.wantErr)
			}
			defer shutdown()
			if got := tracing.Enabled(tp); got != tc.wantEnabled {
				t.Errorf("Enabled = %v, want %v", got, tc.wantEnabled)
			}
			if got := tracing.Tracer(tp, "x") != nil; got != tc.wantEnabled {
				t.Errorf("Tracer is non-nil = %v, want %v", got, tc.wantEnabled)
			}
		})
	}
}

// The whole way a span travels: Setup's OTLP/HTTP exporter to a collector, flushed by shutdown.
func TestSetupExportsThroughOTLPAndFlushesOnShutdown(t *testing.T) {
	cases := []struct {
		name        string
		serviceEnv  string
		wantService string
	}{
		{name: "the binary's default service name", wantService: "sandbox-router"},
		{name: "OTEL_SERVICE_NAME wins", serviceEnv: "my-router", wantService: "my-router"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			rcv := tracingtest.NewReceiver(t)
			t.Setenv(tracing.EnvEndpoint, rcv.URL())
			if tc.serviceEnv != "" {
				t.Setenv("OTEL_SERVICE_NAME", tc.serviceEnv)
			}
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000") // only shutdown may flush
			var exportErrs []error
			tp, shutdown, err := tracing.Setup(context.Background(), "sandbox-router", func(err error) { exportErrs = append(exportErrs, err) })
			if err != nil {
				t.Fatal(err)
			}
			parent, _ := tracing.FromAnnotations(context.Background(), map[string]string{tracing.TraceContextAnnotation: traceparent})
			_, span := tp.Tracer("test").Start(parent, "work")
			span.End()
			shutdown()
			if len(exportErrs) > 0 {
				t.Fatalf("export errors: %v", exportErrs)
			}
			spans := rcv.Spans()
			if len(spans) != 1 {
				t.Fatalf("the receiver got %d spans, want the one ended: %+v", len(spans), spans)
			}
			got := spans[0]
			if got.Name != "work" || got.Service != tc.wantService || got.TraceID != traceID || got.ParentSpanID != spanID {
				t.Errorf("exported span = %s of %s in trace %s under %s; want work of %s in trace %s under %s",
					got.Name, got.Service, got.TraceID, got.ParentSpanID, tc.wantService, traceID, spanID)
			}
		})
	}
}

// clearEnv unsets every variable Setup and the SDK read, for the duration of the test (the SDK
// takes a variable set to "" as set).
func clearEnv(t *testing.T) {
	for _, k := range []string{tracing.EnvEndpoint, tracing.EnvTracesEndpoint, tracing.EnvProtocol, tracing.EnvTracesProtocol,
		tracing.EnvTracesExporter, tracing.EnvSDKDisabled, "OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		t.Setenv(k, "") // restores the original value at the end
		_ = os.Unsetenv(k)
	}
}
