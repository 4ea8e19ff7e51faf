package sandboxd_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// syncBuffer is a log destination handlers write to concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// At the most verbose level, a request's lines carry the router's request id and the route, and
// never its token, its session env or its own env values.
func TestRequestLogsNameTheRequestAndNoSecrets(t *testing.T) {
	var out syncBuffer
	e := sandboxdtest.New(t, func(c *sandboxd.Config) {
		c.Token = "tok-secret-1"
		c.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.Level(-10)}))
	})
	session, err := wire.EncodeSessionEnv(map[string]string{"API_KEY": "session-secret-2"})
	if err != nil {
		t.Fatal(err)
	}
	e.Do("POST", "/v1/exec", wire.ExecRequest{Command: "true", Env: map[string]string{"PASSWORD": "request-secret-3"}}, http.StatusOK,
		"Authorization", "Bearer tok-secret-1", "X-Request-Id", "req-77", wire.HeaderSessionEnv, session)
	e.Do("GET", "/v1/stat?path=missing", nil, http.StatusUnauthorized, "Authorization", "Bearer wrong-secret-4", "X-Request-Id", "req-78")

	logged := out.String()
	for _, want := range []string{"requestID=req-77", "route=", "status=200"} {
		if !strings.Contains(logged, want) {
			t.Errorf("the request's lines lack %q:\n%s", want, logged)
		}
	}
	for _, secret := range []string{"tok-secret-1", "session-secret-2", "request-secret-3", "wrong-secret-4"} {
		if strings.Contains(logged, secret) {
			t.Errorf("%q reached the log:\n%s", secret, logged)
		}
	}
}
