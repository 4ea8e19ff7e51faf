package bench_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
)

// Data-plane round trips through the real router and the real sandboxd on loopback, against
// sandboxd directly: the difference is what the router adds to an agent's exec or file call.
//
//	go test -run '^$' -bench . -benchtime 2s ./test/bench/

type oneSandbox struct{}

func (oneSandbox) Resolve(_, _ string) (router.Target, error) {
	return router.Target{Addr: netip.MustParseAddr("127.0.0.1")}, nil
}

type dataplane struct {
	direct, routed string // base URLs
	port           string // sandboxd's port, for X-Sandbox-Port
}

func newDataplane(b *testing.B) *dataplane {
	b.Helper()
	srv, err := sandboxd.New(sandboxd.Config{Root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	daemon := httptest.NewServer(srv)
	b.Cleanup(func() { daemon.Close(); _ = srv.Close() })
	proxy := router.NewProxy(router.ProxyOptions{Resolver: oneSandbox{}})
	front := httptest.NewServer(router.NewHandler(router.HandlerOptions{Proxy: proxy}))
	b.Cleanup(func() { front.Close(); proxy.Close() })
	_, port, _ := net.SplitHostPort(daemon.Listener.Addr().String())
	return &dataplane{direct: daemon.URL, routed: front.URL, port: port}
}

func (d *dataplane) do(b *testing.B, viaRouter bool, method, path string, body []byte) {
	base := d.direct
	if viaRouter {
		base = d.routed
	}
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	if viaRouter {
		req.Header.Set("X-Sandbox-ID", "bench")
		req.Header.Set("X-Sandbox-Port", d.port)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		b.Fatalf("%s %s: status %d", method, path, resp.StatusCode)
	}
}

func benchBoth(b *testing.B, run func(b *testing.B, d *dataplane, viaRouter bool)) {
	for _, via := range []bool{false, true} {
		name := "direct"
		if via {
			name = "via-router"
		}
		b.Run(name, func(b *testing.B) {
			d := newDataplane(b)
			b.ReportAllocs()
			run(b, d, via)
		})
	}
}

// BenchmarkExecRoundTrip runs `true` through the buffered exec API.
func BenchmarkExecRoundTrip(b *testing.B) {
	benchBoth(b, func(b *testing.B, d *dataplane, via bool) {
		body := []byte(`{"argv":["true"]}`)
		for b.Loop() {
			d.do(b, via, http.MethodPost, "/v1/exec", body)
		}
	})
}

// BenchmarkLegacyExecute runs `true` through the legacy POST /execute of existing clients.
func BenchmarkLegacyExecute(b *testing.B) {
	benchBoth(b, func(b *testing.B, d *dataplane, via bool) {
		body := []byte(`{"command":"true"}`)
		for b.Loop() {
			d.do(b, via, http.MethodPost, "/execute", body)
		}
	})
}

// BenchmarkFileWrite4MiB writes a 4 MiB file (atomic write) per op.
func BenchmarkFileWrite4MiB(b *testing.B) {
	data := []byte(strings.Repeat("x", 4<<20))
	benchBoth(b, func(b *testing.B, d *dataplane, via bool) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			d.do(b, via, http.MethodPut, "/v1/files/dir/blob", data)
		}
	})
}

// BenchmarkFileRead4MiB reads a 4 MiB file per op.
func BenchmarkFileRead4MiB(b *testing.B) {
	data := []byte(strings.Repeat("x", 4<<20))
	benchBoth(b, func(b *testing.B, d *dataplane, via bool) {
		d.do(b, via, http.MethodPut, "/v1/files/dir/blob", data)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			d.do(b, via, http.MethodGet, "/v1/files/dir/blob", nil)
		}
	})
}
