package sandboxd_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process"
	"github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process/envdprocessconnect"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// E2B's API on the envd port: the router's session environment reaches the commands, and a
// process started through it keeps the sandbox active (idle pause must not take it).
func TestEnvdHandlerSessionEnvAndActivity(t *testing.T) {
	e := sandboxdtest.New(t)
	ts := httptest.NewServer(e.Srv.EnvdHandler())
	t.Cleanup(ts.Close)
	hdr, err := wire.EncodeSessionEnv(map[string]string{"FROM_SESSION": "yes"})
	if err != nil {
		t.Fatal(err)
	}
	client := envdprocessconnect.NewProcessClient(ts.Client(), ts.URL, connect.WithProtoJSON())
	start := func(script string) *connect.ServerStreamForClient[pb.StartResponse] {
		req := connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}})
		req.Header().Set(wire.HeaderSessionEnv, hdr)
		s, err := client.Start(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start(`echo "$FROM_SESSION"`)
	var out string
	for s.Receive() {
		out += string(s.Msg().GetEvent().GetData().GetStdout())
	}
	if s.Err() != nil || out != "yes\n" {
		t.Fatalf("stdout %q (%v), want the session's variable", out, s.Err())
	}

	s = start("while [ ! -e stop ]; do sleep 0.02; done")
	if !s.Receive() {
		t.Fatal(s.Err())
	}
	_ = s.Close() // the client leaves; the process stays
	if a := activityOf(t, e); !a.Active || a.RunningProcesses != 1 {
		t.Fatalf("with an envd process running: %+v; want active with 1 running process", a)
	}
	e.WriteFile("stop", "")
	sandboxdtest.Eventually(t, "the envd process exits and the sandbox goes idle", func() bool {
		a := activityOf(t, e)
		return !a.Active && a.RunningProcesses == 0
	})

	// Requests are measured under bounded route names.
	resp, err := ts.Client().Get(ts.URL + "/no/such/" + t.Name())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	metrics := string(e.Do("GET", "/metrics", nil, http.StatusOK))
	for _, want := range []string{
		`sandboxd_http_requests_total{code="200",method="POST",route="envd:/process.Process/Start"} 2`,
		`sandboxd_http_requests_total{code="404",method="GET",route="envd:unmatched"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
