package conformance

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

// TestRouter: the router's own answers to upstream's clients: its health check (the Python agent
// server validates it at startup), X-Sandbox-Timeout (both SDKs send it) and routing errors.
func TestRouter(t *testing.T) {
	d := sdktest.NewSandboxd(t)
	r := sdktest.NewRouter(t)
	routed := target{name: "router", baseURL: r.URL, headers: http.Header{
		"X-Sandbox-Id": {sandboxID}, "X-Sandbox-Namespace": {"default"}, "X-Sandbox-Port": {strconv.Itoa(d.Port)},
	}}
	bare := target{name: "router", baseURL: r.URL}
	tests := []struct {
		name string
		tg   target
		x    exchange
	}{
		{"health check", bare, exchange{client: python, method: "GET", path: "healthz", wantStatus: 200, wantJSON: `{"status":"ok"}`}},
		{"no sandbox id", bare, exchange{client: goSDK, method: "POST", path: "execute", body: executeBody(goSDK, "true"),
			contentType: "application/json", wantStatus: 400, wantJSON: `{"detail":"X-Sandbox-ID header is required."}`}},
		{"timeout within the limit", routed, exchange{client: python, method: "POST", path: "execute", body: executeBody(python, "sleep 0.2; echo done"),
			contentType: "application/json", wantStatus: 200, wantJSON: `{"stdout":"done\n","stderr":"","exit_code":0}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.x.run(t, tc.tg) })
	}

	t.Run("timeout passes", func(t *testing.T) {
		slow := target{baseURL: r.URL, headers: routed.headers.Clone()}
		slow.headers.Set("X-Sandbox-Timeout", "0.5") // what the Go SDK sends for a 500ms deadline
		start := time.Now()
		resp := send(t, slow, goSDK, "POST", "execute", executeBody(goSDK, "sleep 30"), "application/json")
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("status %d (%s), want 504", resp.StatusCode, body)
		}
		wantJSON(t, body, `{"detail":"Timed out waiting for the backend sandbox: `+sandboxID+`"}`)
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("504 after %v, want it after about 0.5s", d)
		}
	})
}
