package sandboxd_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
)

func TestV1HealthAndMetadata(t *testing.T) {
	t.Setenv("SANDBOX_ID", "sb-1")
	t.Setenv("SANDBOX_API_TOKEN", "hidden")
	t.Setenv("SANDBOX_PRIVATE_THING", "hidden")
	t.Setenv("OTHER_VAR", "hidden")
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.Token = "secret" })
	var h map[string]any
	if err := json.Unmarshal(e.Do("GET", "/v1/health", nil, http.StatusOK), &h); err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h["status"] != "ok" || h["uptime_seconds"] == nil {
		t.Fatalf("health %v, want status ok and uptime_seconds (no token needed)", h)
	}
	b := e.Do("GET", "/v1/metadata", nil, http.StatusOK, "Authorization", "Bearer secret")
	if string(b) != `{"env":{"SANDBOX_ID":"sb-1"}}` {
		t.Fatalf("metadata %s, want only SANDBOX_ID", b)
	}
	sandboxd.SetDraining(e.Srv, true)
	sandboxdtest.WantV1Error(t, e.Do("GET", "/v1/health", nil, http.StatusServiceUnavailable), "UNAVAILABLE", "sandboxd is shutting down")
	sandboxd.SetDraining(e.Srv, false)
}
