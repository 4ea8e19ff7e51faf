package sdk

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// TestClientNeverFollowsARedirect: a sandbox (or anything on the router's path) that answers
// 3xx toward another pod gets an error back; the SDK sends nothing, and so no router token, to
// the Location.
func TestClientNeverFollowsARedirect(t *testing.T) {
	var hits atomic.Int32
	other := h2cServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	sandbox := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", other.URL+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	for _, mode := range []Mode{ModeRouter, ModeDirect} {
		t.Run(string(mode), func(t *testing.T) {
			o := Options{RESTConfig: offlineConfig, Mode: mode, RouterURL: sandbox.URL, RouterToken: "secret",
				SandboxPort: sandbox.Listener.Addr().(*net.TCPAddr).Port}
			c, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sb, err := c.HandleFor(testwrap.MakeClaim("default", "claim-1").Template("tmpl").ReadyWith("sb-1", "127.0.0.1").Obj())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sb.Close() }()
			for _, op := range []struct {
				name string
				call func() error
			}{
				{"read a file", func() error { _, err := sb.Files().Read(testCtx(t), "/workspace/a"); return err }},
				{"write a file", func() error { return sb.Files().Write(testCtx(t), "/workspace/a", []byte("x"), 0o644) }},
				{"run a command", func() error { _, err := sb.Run(testCtx(t), Argv("true")); return err }},
			} {
				if err := op.call(); err == nil || !strings.Contains(err.Error(), "307") {
					t.Errorf("%s: err = %v, want the 307 as an error", op.name, err)
				}
				if n := hits.Load(); n != 0 {
					t.Fatalf("%s: the redirect's target got %d requests, want none", op.name, n)
				}
			}
		})
	}
}

// h2cServer serves HTTP/1.1 and h2c, as sandboxd and the router do.
func h2cServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}
