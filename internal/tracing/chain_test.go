package tracing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing/tracingtest"
	processv1 "github.com/agent-sandbox/agent-sandbox/pkg/proto/process/v1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// chain is a real router in front of a real sandboxd, each exporting its spans through Setup's
// OTLP exporter to one in-process collector, as in a cluster.
type chain struct {
	rcv      *tracingtest.Receiver
	router   string // the router's URL
	port     string // sandboxd's port, the X-Sandbox-Port
	grpcConn *grpc.ClientConn
}

func newChain(t *testing.T) *chain {
	clearEnv(t)
	c := &chain{rcv: tracingtest.NewReceiver(t)}
	t.Setenv(tracing.EnvEndpoint, c.rcv.URL())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10") // ms: spans arrive while the test waits for them
	routerTP, flushRouter, err := tracing.Setup(context.Background(), "sandbox-router", func(err error) { t.Errorf("router export: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(flushRouter)
	sandboxdTP, flushSandboxd, err := tracing.Setup(context.Background(), "sandboxd", func(err error) { t.Errorf("sandboxd export: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(flushSandboxd)

	sbd := sandboxdtest.New(t, func(cfg *sandboxd.Config) { cfg.TracerProvider = sandboxdTP })
	_, c.port, _ = net.SplitHostPort(sbd.TS.Listener.Addr().String())
	proxy := router.NewProxy(router.ProxyOptions{Resolver: loopbackResolver{}, TracerProvider: routerTP})
	ts := httptest.NewUnstartedServer(router.NewHandler(router.HandlerOptions{Proxy: proxy, TracerProvider: routerTP}))
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	ts.Config.Protocols = &protos
	ts.Start()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		proxy.Close()
	})
	c.router = ts.URL
	c.grpcConn, err = grpc.NewClient(strings.TrimPrefix(ts.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.grpcConn.Close() })
	return c
}

type loopbackResolver struct{}

func (loopbackResolver) Resolve(string, string) (router.Target, error) {
	return router.Target{Addr: netip.MustParseAddr("127.0.0.1")}, nil
}

// headers are what a client sends the router: the route, and its traceparent when it has one.
func (c *chain) headers(sandbox, traceparent string) http.Header {
	h := http.Header{router.HeaderSandboxID: {sandbox}, router.HeaderSandboxPort: {c.port}}
	if traceparent != "" {
		h.Set("Traceparent", traceparent)
	}
	return h
}

func (c *chain) execHTTP(t *testing.T, h http.Header) {
	body, _ := json.Marshal(wire.ExecRequest{Argv: []string{"true"}})
	req, _ := http.NewRequest("POST", c.router+"/v1/exec", strings.NewReader(string(body)))
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/exec through the router: %s", resp.Status)
	}
}

func (c *chain) execGRPC(t *testing.T, h http.Header) {
	md := metadata.MD{}
	for k, v := range h {
		md.Set(k, v...)
	}
	ctx := metadata.NewOutgoingContext(sandboxdtest.GRPCCtx(t), md)
	if _, err := processv1.NewProcessServiceClient(c.grpcConn).Execute(ctx,
		&processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"true"}}}); err != nil {
		t.Fatalf("gRPC Execute through the router: %v", err)
	}
}

func (c *chain) execWebSocket(t *testing.T, h http.Header) {
	ctx := sandboxdtest.GRPCCtx(t)
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(c.router, "http")+"/v1/exec/ws", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	req, _ := json.Marshal(wire.ExecRequest{Argv: []string{"true"}})
	if err := conn.Write(ctx, websocket.MessageText, req); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("reading the session: %v", err)
		}
		var f wire.Frame
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		if f.Type == wire.FrameExit {
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return
		}
	}
}

// A client's traceparent → the router's span → sandboxd's span, whatever the protocol.
func TestTheTraceRunsFromClientThroughRouterToSandboxd(t *testing.T) {
	c := newChain(t)
	cases := []struct {
		name         string
		exec         func(*chain, *testing.T, http.Header)
		clientTraced bool
		wantSandboxd string // sandboxd's span name
	}{
		{"HTTP/1.1 exec", (*chain).execHTTP, true, "POST /v1/exec"},
		{"gRPC over h2c", (*chain).execGRPC, true, "process.v1.ProcessService/Execute"},
		{"WebSocket exec", (*chain).execWebSocket, true, "GET /v1/exec/ws"},
		{"HTTP/1.1 exec, client without a trace: the router starts one", (*chain).execHTTP, false, "POST /v1/exec"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sandbox := "sb-" + strconv.Itoa(i)
			var client trace.SpanContext
			var traceparent string
			if tc.clientTraced {
				client = clientSpan(i + 1)
				carrier := propagation.MapCarrier{}
				tracing.Propagator.Inject(trace.ContextWithSpanContext(context.Background(), client), carrier)
				traceparent = carrier["traceparent"]
			}
			tc.exec(c, t, c.headers(sandbox, traceparent))

			var routerSpan, sandboxdSpan tracingtest.Span
			testwrap.Eventually(t, "the router's and sandboxd's spans of "+sandbox, func() error {
				var err error
				if routerSpan, err = findSpan(c.rcv, func(s tracingtest.Span) bool {
					return s.Service == "sandbox-router" && s.Attributes["sandbox.id"] == sandbox
				}); err != nil {
					return err
				}
				sandboxdSpan, err = findSpan(c.rcv, func(s tracingtest.Span) bool {
					return s.Service == "sandboxd" && s.ParentSpanID == routerSpan.SpanID
				})
				return err
			})
			if tc.clientTraced {
				if routerSpan.TraceID != client.TraceID().String() || routerSpan.ParentSpanID != client.SpanID().String() {
					t.Errorf("router span in trace %s under %s; want the client's trace %s under its span %s",
						routerSpan.TraceID, routerSpan.ParentSpanID, client.TraceID(), client.SpanID())
				}
			} else if routerSpan.ParentSpanID != "" {
				t.Errorf("router span under %s; want a root span", routerSpan.ParentSpanID)
			}
			if sandboxdSpan.TraceID != routerSpan.TraceID || sandboxdSpan.Name != tc.wantSandboxd {
				t.Errorf("sandboxd span %q in trace %s; want %q in the router's trace %s",
					sandboxdSpan.Name, sandboxdSpan.TraceID, tc.wantSandboxd, routerSpan.TraceID)
			}
		})
	}
}

// clientSpan is a sampled span context as a client's SDK would send it.
func clientSpan(n int) trace.SpanContext {
	tid, _ := trace.TraceIDFromHex(fmt.Sprintf("%032x", 0xabc0000+n))
	sid, _ := trace.SpanIDFromHex(fmt.Sprintf("%016x", 0xdef0000+n))
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// findSpan returns the one received span that match accepts.
func findSpan(rcv *tracingtest.Receiver, match func(tracingtest.Span) bool) (tracingtest.Span, error) {
	var found []tracingtest.Span
	all := rcv.Spans()
	for _, s := range all {
		if match(s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		return tracingtest.Span{}, fmt.Errorf("%d matching spans among %d received: %+v", len(found), len(all), found)
	}
	return found[0], nil
}
