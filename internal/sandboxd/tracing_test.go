package sandboxd_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	processv1 "github.com/agent-sandbox/agent-sandbox/pkg/proto/process/v1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

const (
	callerTrace       = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan        = "00f067aa0ba902b7"
	callerTraceparent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// tracedSandboxd records its spans; spans waits for the requests to end and returns them.
func tracedSandboxd(t *testing.T, token string) (*sandboxdtest.Env, func() []sdktrace.ReadOnlySpan) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.TracerProvider = tp; c.Token = token })
	return e, func() []sdktrace.ReadOnlySpan {
		e.TS.Close() // waits for the handlers, whose deferred work ends the spans
		return rec.Ended()
	}
}

func TestEveryRequestIsASpanUnderTheCallersTraceparent(t *testing.T) {
	cases := []struct {
		name     string
		method   string
		path     string
		body     any
		token    string
		wantName string
		wantCode int
	}{
		{name: "an exec", method: "POST", path: "/v1/exec", body: wire.ExecRequest{Argv: []string{"true"}}, wantName: "POST /v1/exec", wantCode: 200},
		{name: "a file: the route, not the path", method: "GET", path: "/v1/stat/secret-name.txt", wantName: "GET /v1/stat/{path}", wantCode: 404},
		{name: "a refused request", method: "POST", path: "/v1/exec", body: wire.ExecRequest{Argv: []string{"true"}}, token: "t", wantName: "POST /v1/exec", wantCode: 401},
		{name: "no route", method: "GET", path: "/nowhere", wantName: "GET unmatched", wantCode: 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, spans := tracedSandboxd(t, tc.token)
			e.Do(tc.method, tc.path, tc.body, tc.wantCode, "Traceparent", callerTraceparent)
			got := spans()
			if len(got) != 1 {
				t.Fatalf("sandboxd ended %d spans, want 1", len(got))
			}
			s := got[0]
			attrs := attribute.NewSet(s.Attributes()...)
			code, _ := attrs.Value("http.status_code")
			if s.Name() != tc.wantName || code.AsInt64() != int64(tc.wantCode) || s.SpanKind() != trace.SpanKindServer {
				t.Errorf("span %q (%v) code %d; want server span %q code %d", s.Name(), s.SpanKind(), code.AsInt64(), tc.wantName, tc.wantCode)
			}
			if p := s.Parent(); p.TraceID().String() != callerTrace || p.SpanID().String() != callerSpan {
				t.Errorf("span's parent %s/%s; want the caller's %s/%s", p.TraceID(), p.SpanID(), callerTrace, callerSpan)
			}
		})
	}
}

func TestEveryGRPCCallIsASpanUnderTheCallersTraceparent(t *testing.T) {
	cases := []struct {
		name     string
		token    string
		wantCode codes.Code
	}{
		{name: "a call", wantCode: codes.OK},
		{name: "a refused call", token: "t", wantCode: codes.Unauthenticated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, spans := tracedSandboxd(t, tc.token)
			ctx := metadata.AppendToOutgoingContext(sandboxdtest.GRPCCtx(t), "traceparent", callerTraceparent)
			_, err := sandboxdtest.GRPCOnHTTPPort(t, e).Execute(ctx, &processv1.ExecuteRequest{Config: shell("true")})
			if status.Code(err) != tc.wantCode {
				t.Fatalf("Execute: %v, want %v", err, tc.wantCode)
			}
			got := spans()
			if len(got) != 1 {
				t.Fatalf("sandboxd ended %d spans, want the call's alone", len(got))
			}
			s := got[0]
			attrs := attribute.NewSet(s.Attributes()...)
			code, _ := attrs.Value("rpc.grpc.status_code")
			if s.Name() != "process.v1.ProcessService/Execute" || codes.Code(code.AsInt64()) != tc.wantCode {
				t.Errorf("span %q code %v; want process.v1.ProcessService/Execute code %v", s.Name(), codes.Code(code.AsInt64()), tc.wantCode)
			}
			if p := s.Parent(); p.TraceID().String() != callerTrace || p.SpanID().String() != callerSpan {
				t.Errorf("span's parent %s/%s; want the caller's %s/%s", p.TraceID(), p.SpanID(), callerTrace, callerSpan)
			}
		})
	}
}

func TestEveryEnvdRequestIsASpanUnderTheCallersTraceparent(t *testing.T) {
	e, spans := tracedSandboxd(t, "")
	ts := httptest.NewServer(e.Srv.EnvdHandler())
	req, err := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/filesystem.Filesystem/Stat", strings.NewReader(`{"path":"/secret-name.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", callerTraceparent)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ts.Close() // the handler's deferred work ends the span
	got := spans()
	if len(got) != 1 {
		t.Fatalf("sandboxd ended %d spans, want 1", len(got))
	}
	s := got[0]
	attrs := attribute.NewSet(s.Attributes()...)
	code, _ := attrs.Value("http.status_code")
	if s.Name() != "POST envd:/filesystem.Filesystem/Stat" || code.AsInt64() != 404 || s.Parent().TraceID().String() != callerTrace {
		t.Errorf("span %q code %d parent %s; want the RPC's route, 404, under the caller's trace", s.Name(), code.AsInt64(), s.Parent().TraceID())
	}
}
