package sdk

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// newHeaderEcho starts a server that records each request's headers (and
// path, as X-Test-Path) and answers like a successful /v1/exec.
func newHeaderEcho(t *testing.T, got chan<- http.Header) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("X-Test-Path", r.URL.Path)
		h.Set("X-Test-Proto", r.Proto)
		select {
		case got <- h:
		default:
		}
		w.Header().Set("Content-Type", wire.ContentTypeJSON)
		_ = json.NewEncoder(w).Encode(wire.ExecResult{})
	}))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}
