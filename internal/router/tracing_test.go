package router

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const (
	clientTrace       = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan        = "00f067aa0ba902b7"
	clientTraceparent = "00-" + clientTrace + "-" + clientSpan + "-01"
)

// tracedRouter is a router whose spans land in the returned recorder (nil: tracing off); the
// upstream records the traceparent it receives. ended waits for the requests to finish (the
// span ends after the client has its answer) and returns the spans.
func tracedRouter(t *testing.T, on bool) (url, port string, ended func() []sdktrace.ReadOnlySpan, upstreamSaw chan string) {
	t.Helper()
	upstreamSaw = make(chan string, 1)
	_, port = newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case upstreamSaw <- r.Header.Get("Traceparent"):
		default:
		}
	}))
	var tp trace.TracerProvider
	var rec *tracetest.SpanRecorder
	if on {
		rec = tracetest.NewSpanRecorder()
		tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	}
	p := NewProxy(ProxyOptions{Resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}, TracerProvider: tp})
	srv := httptest.NewServer(NewHandler(HandlerOptions{Proxy: p, TracerProvider: tp}))
	t.Cleanup(func() {
		srv.Close()
		p.Close()
	})
	ended = func() []sdktrace.ReadOnlySpan {
		srv.Close() // waits for the handlers
		return rec.Ended()
	}
	return srv.URL, port, ended, upstreamSaw
}

func TestTheRouterContinuesTheClientsTraceAndPassesItsSpanOn(t *testing.T) {
	cases := []struct {
		name            string
		traceparent     string // the client's
		wantClientTrace bool   // the router's span is the client span's child
	}{
		{name: "the client's trace", traceparent: clientTraceparent, wantClientTrace: true},
		{name: "no traceparent: a new trace"},
		{name: "a malformed traceparent: a new trace", traceparent: "00-zz-yy-01"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, port, ended, upstreamSaw := tracedRouter(t, true)
			req := routed(t, "GET", url+"/x", "sb", port, nil)
			if tc.traceparent != "" {
				req.Header.Set("Traceparent", tc.traceparent)
			}
			readAll(t, do(t, req))
			spans := ended()
			if len(spans) != 1 {
				t.Fatalf("the router ended %d spans, want 1", len(spans))
			}
			sc, parent := spans[0].SpanContext(), spans[0].Parent()
			if got := parent.IsValid() && parent.TraceID().String() == clientTrace && parent.SpanID().String() == clientSpan; got != tc.wantClientTrace {
				t.Errorf("router span's parent = %v, want the client's span: %v", parent, tc.wantClientTrace)
			}
			if want, got := "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01", <-upstreamSaw; got != want {
				t.Errorf("the sandbox got traceparent %q, want the router span's %q", got, want)
			}
		})
	}
}

func TestWithoutTracingTheRouterPassesTheClientsTraceparentUntouched(t *testing.T) {
	for _, traceparent := range []string{clientTraceparent, ""} {
		url, port, _, upstreamSaw := tracedRouter(t, false)
		req := routed(t, "GET", url+"/x", "sb", port, nil)
		if traceparent != "" {
			req.Header.Set("Traceparent", traceparent)
		}
		readAll(t, do(t, req))
		if got := <-upstreamSaw; got != traceparent {
			t.Errorf("client sent traceparent %q; the sandbox got %q", traceparent, got)
		}
	}
}

func TestRouterSpanAttributes(t *testing.T) {
	cases := []struct {
		name     string
		method   string
		path     string
		sandbox  string
		wantName string
		wantCode int64
	}{
		{name: "a routed request", method: "GET", path: "/x", sandbox: "sb", wantName: "HTTP GET", wantCode: 200},
		{name: "an unknown sandbox", method: "POST", path: "/x", sandbox: "nope", wantName: "HTTP POST", wantCode: 404},
		{name: "a method outside the standard set", method: "BREW", path: "/x", sandbox: "sb", wantName: "HTTP _OTHER", wantCode: 200},
		{name: "a path that is not UTF-8", method: "GET", path: "/%ff%fe", sandbox: "sb", wantName: "HTTP GET", wantCode: 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, port, ended, _ := tracedRouter(t, true)
			readAll(t, do(t, routed(t, tc.method, url+tc.path, tc.sandbox, port, nil)))
			spans := ended()
			if len(spans) != 1 {
				t.Fatalf("the router ended %d spans, want 1", len(spans))
			}
			s := spans[0]
			attrs := attribute.NewSet(s.Attributes()...)
			code, _ := attrs.Value("http.status_code")
			id, _ := attrs.Value("sandbox.id")
			if s.Name() != tc.wantName || code.AsInt64() != tc.wantCode || id.AsString() != tc.sandbox || s.SpanKind() != trace.SpanKindServer {
				t.Errorf("span %q (%v) code %d sandbox.id %q; want server span %q code %d sandbox.id %q",
					s.Name(), s.SpanKind(), code.AsInt64(), id.AsString(), tc.wantName, tc.wantCode, tc.sandbox)
			}
			for _, kv := range s.Attributes() {
				if !utf8.ValidString(kv.Value.Emit()) {
					t.Errorf("attribute %s = %q is not UTF-8", kv.Key, kv.Value.Emit())
				}
			}
		})
	}
}

func do(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := h1Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
