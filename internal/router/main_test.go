package router

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// stubResolver answers from a fixed table keyed "ns/name"; calls counts lookups.
type stubResolver struct {
	mu      sync.Mutex
	targets map[string]Target
	// errs are answered with the key's target, if any: a Sandbox the cache knows but will not
	// route to still has its UID and ports.
	errs  map[string]error
	calls int
	// next, when set, replaces the answer after the first lookup (re-resolution tests).
	next map[string]Target
}

func (s *stubResolver) Resolve(ns, name string) (Target, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	key := ns + "/" + name
	if err, ok := s.errs[key]; ok {
		return s.targets[key], err
	}
	if t, ok := s.next[key]; ok && s.calls > 1 {
		return t, nil
	}
	if t, ok := s.targets[key]; ok {
		return t, nil
	}
	return Target{}, &ResolveError{Kind: ErrNotFound, Namespace: ns, Name: name}
}

var loopback = Target{Addr: netip.MustParseAddr("127.0.0.1")}

// mustPort parses a test port ("8080").
func mustPort(t testing.TB, s string) uint16 {
	t.Helper()
	p, ok := parsePort(s)
	if !ok {
		t.Fatalf("bad port %q", s)
	}
	return p
}

// bothProtocols is HTTP/1.1 plus h2c, what the router's proxy port speaks.
func bothProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// newUpstream starts a sandbox stand-in on 127.0.0.1 speaking HTTP/1.1 and h2c; it returns the
// server and its port.
func newUpstream(t testing.TB, h http.Handler) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = bothProtocols()
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return srv, port
}

type routerOpts struct {
	resolver Resolver
	guard    GuardOptions
	metrics  *Metrics
	headerTO time.Duration // upstream response header timeout
	sandboxd []uint16      // SandboxdPorts; nil for the default
	waker    Waker
	wakeTO   time.Duration
}

// newRouter starts the proxy port in front of r, as Run assembles it.
func newRouter(t testing.TB, o routerOpts) *httptest.Server {
	t.Helper()
	p := NewProxy(ProxyOptions{Resolver: o.resolver, Metrics: o.metrics, DialRetries: 2, RetryBackoff: 1,
		ResponseHeaderTimeout: o.headerTO, SandboxdPorts: o.sandboxd, Waker: o.waker, WakeTimeout: o.wakeTO})
	srv := httptest.NewUnstartedServer(NewHandler(HandlerOptions{Proxy: p, Guard: o.guard, Metrics: o.metrics}))
	srv.Config.Protocols = bothProtocols()
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		p.Close()
	})
	return srv
}

// h1Client is a plain HTTP/1.1 client whose idle connections are closed at cleanup.
func h1Client(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// h2cClient speaks HTTP/2 over cleartext with prior knowledge, as gRPC clients do.
func h2cClient(t testing.TB) *http.Client {
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true) // h2c only: prior knowledge, no upgrade
	tr := &http.Transport{Protocols: &protos}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// routed builds a request to the router carrying the routing headers.
func routed(t testing.TB, method, url, id, port string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if id != "" {
		req.Header.Set(HeaderSandboxID, id)
	}
	if port != "" {
		req.Header.Set(HeaderSandboxPort, port)
	}
	return req
}

// closedPort returns a local port nothing listens on.
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return strconv.Itoa(port)
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
