package sandboxd_test

import (
	"net/http"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

func activityOf(t *testing.T, e *sandboxdtest.Env) wire.Activity {
	t.Helper()
	var a wire.Activity
	e.DoJSON("GET", "/v1/activity", nil, http.StatusOK, &a)
	return a
}

// GET /v1/activity: probes and the endpoint itself are no activity; a running background
// process is; POST /v1/activity (the router's touch) answers 204.
func TestActivityEndpointSaysWhatKeepsTheSandboxBusy(t *testing.T) {
	e := sandboxdtest.New(t)
	e.Do("GET", "/healthz", nil, http.StatusOK)
	e.Do("GET", "/v1/health", nil, http.StatusOK)
	if a := activityOf(t, e); a.Active || a.InflightRequests != 0 || a.RunningProcesses != 0 || a.LastActivity.IsZero() {
		t.Fatalf("after probes only: %+v; want inactive, nothing in flight, a last activity time", a)
	}
	var sp wire.StartProcessResponse
	e.DoJSON("POST", "/v1/processes", wire.ExecRequest{Command: "while [ ! -e stop ]; do sleep 0.02; done"}, http.StatusCreated, &sp)
	if a := activityOf(t, e); !a.Active || a.RunningProcesses != 1 || a.IdleSeconds != 0 {
		t.Fatalf("with a background process running: %+v; want active with 1 running process", a)
	}
	e.WriteFile("stop", "")
	sandboxdtest.Eventually(t, "the process exits and the sandbox goes idle", func() bool {
		a := activityOf(t, e)
		return !a.Active && a.RunningProcesses == 0
	})
	e.Do("POST", "/v1/activity", nil, http.StatusNoContent)
}
