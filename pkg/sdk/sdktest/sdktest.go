// Package sdktest helps test code that uses pkg/sdk without a real cluster
// data plane: a real sandboxd on a temporary directory, a real
// sandbox-router in front of it, and a stand-in for the controllers that
// marks claims and sandboxes ready against a real (envtest) API server.
//
// Point a Client at them with Options{Mode: sdk.ModeDirect, SandboxPort:
// d.Port} (pods get the IP 127.0.0.1, resumed ones 127.0.0.2 in turn) or Options{Mode: sdk.ModeRouter,
// RouterURL: r.URL, SandboxPort: d.Port}.
//
// It is the one package under pkg/ that imports internal ones, on purpose:
// it serves the real servers (internal/sandboxd, internal/router) in-process,
// because a test double of them would drift from what runs in the cluster and
// hide the very differences these tests exist to catch. Go allows that import
// from here, and a module that imports sdktest builds as usual; only its
// exported API is public, and it names no internal type. The SDK itself
// (pkg/sdk) and the wire contracts it speaks (pkg/sandboxd/wire,
// pkg/proto/process/v1, pkg/egress) import no internal package.
package sdktest

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
)

// Sandboxd is a real sandboxd serving a temporary root on 127.0.0.1 (and SecondLoopbackIP) over
// HTTP/1.1 and h2c.
type Sandboxd struct {
	// URL is http://127.0.0.1:<Port>.
	URL  string
	Port int
	// Root is the real directory sandbox paths are relative to.
	Root string
}

// SandboxdOptions tune NewSandboxd.
type SandboxdOptions struct {
	// Token makes sandboxd require "Authorization: Bearer <Token>".
	Token string
	// ExecTimeout is the default command timeout (default 1m).
	ExecTimeout time.Duration
}

// NewSandboxd starts a sandboxd on a t.TempDir root; it stops (killing the
// commands it runs) when the test ends.
func NewSandboxd(t testing.TB, opts ...SandboxdOptions) *Sandboxd {
	t.Helper()
	var o SandboxdOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.ExecTimeout == 0 {
		o.ExecTimeout = time.Minute
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	srv, err := sandboxd.New(sandboxd.Config{
		Root:        root,
		Token:       o.Token,
		ExecTimeout: o.ExecTimeout,
		KillGrace:   500 * time.Millisecond,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("sdktest: starting sandboxd: %v", err)
	}
	first, second, err := listenPair()
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Listener.Close()
	ts.Listener = first
	ts.Config.Protocols = bothProtocols()
	ts.Start()
	// The resumed pods of Controller have the second address: the same server answers there.
	resumed := &http.Server{Handler: srv, Protocols: bothProtocols()}
	go func() { _ = resumed.Serve(second) }()
	t.Cleanup(func() {
		_ = srv.Close()             // kill commands first so no handler keeps Close waiting
		ts.CloseClientConnections() // end streams (watches, log follows) a test left open
		_ = resumed.Close()
		ts.Close()
	})
	_, port, _ := net.SplitHostPort(first.Addr().String())
	p, _ := strconv.Atoi(port)
	return &Sandboxd{URL: ts.URL, Port: p, Root: root}
}

// SecondLoopbackIP is the address Controller gives resumed pods; NewSandboxd listens on it too.
const SecondLoopbackIP = "127.0.0.2"

// listenPair listens on the same free port of 127.0.0.1 and SecondLoopbackIP, trying a few
// ports: one free on the first address may be taken on the second.
func listenPair() (first, second net.Listener, err error) {
	for range 20 {
		first, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		_, port, _ := net.SplitHostPort(first.Addr().String())
		second, err = net.Listen("tcp", net.JoinHostPort(SecondLoopbackIP, port))
		if err == nil {
			return first, second, nil
		}
		first.Close()
	}
	return nil, nil, fmt.Errorf("no port free on both 127.0.0.1 and %s: %w", SecondLoopbackIP, err)
}

func bothProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// Router is a real sandbox-router proxy whose Sandbox lookups are answered
// from a table instead of a watch: every Sandbox added resolves to
// 127.0.0.1.
type Router struct {
	// URL is the router's base URL, for Options.RouterURL.
	URL string

	mu     sync.Mutex
	known  map[string]bool
	all    bool
	misses int
}

// NewRouter starts a router on 127.0.0.1; it stops when the test ends.
// With no names, every Sandbox name resolves; otherwise only those added.
func NewRouter(t testing.TB, namespacedNames ...string) *Router {
	t.Helper()
	r := &Router{known: map[string]bool{}, all: len(namespacedNames) == 0}
	for _, n := range namespacedNames {
		r.known[n] = true
	}
	proxy := router.NewProxy(router.ProxyOptions{Resolver: tableResolver{r}, DialRetries: -1})
	ts := httptest.NewUnstartedServer(router.NewHandler(router.HandlerOptions{Proxy: proxy}))
	ts.Config.Protocols = bothProtocols()
	ts.Start()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		proxy.Close()
	})
	r.URL = ts.URL
	return r
}

// Add makes "namespace/name" resolvable.
func (r *Router) Add(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known[namespace+"/"+name] = true
}

// tableResolver answers the router's lookups from r's table; a type of its
// own so that Router's exported methods name no internal type.
type tableResolver struct{ r *Router }

func (t tableResolver) Resolve(namespace, name string) (router.Target, error) {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.all || r.known[namespace+"/"+name] {
		return router.Target{Addr: netip.MustParseAddr("127.0.0.1")}, nil
	}
	r.misses++
	return router.Target{}, &router.ResolveError{Kind: router.ErrNotFound, Namespace: namespace, Name: name}
}

// Misses counts the lookups answered "not found" so far.
func (r *Router) Misses() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.misses
}
