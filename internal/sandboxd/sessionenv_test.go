package sandboxd_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	processv1 "github.com/agent-sandbox/agent-sandbox/pkg/proto/process/v1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// A warm claim's env reaches sandboxd as the router's X-Sandbox-Session-Env header. Every way of
// starting a process must give it the session's variables, under the request's own.
const sessionProbe = `printf '%s|%s|%s' "$API_KEY" "$TASK" "$SANDBOX_USER"`

// sessionHeader is what the router sends for a claim with env API_KEY, TASK and SANDBOX_USER;
// each request below sets TASK itself, which must win.
func sessionHeader(t *testing.T) string {
	t.Helper()
	v, err := wire.EncodeSessionEnv(map[string]string{"API_KEY": "k-1", "TASK": "from the claim", "SANDBOX_USER": "u-7"})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const wantProbe = "k-1|from the request|u-7"

var requestEnv = map[string]string{"TASK": "from the request"}

func TestEveryWayOfStartingAProcessGetsTheSessionEnv(t *testing.T) {
	hdr := sessionHeader(t)
	tests := []struct {
		name string
		run  func(t *testing.T, e *sandboxdtest.Env) string // the probe's stdout
		want string                                         // wantProbe when ""
	}{
		{"buffered exec", func(t *testing.T, e *sandboxdtest.Env) string {
			var res wire.ExecResult
			b := e.Do("POST", "/v1/exec", wire.ExecRequest{Command: sessionProbe, Env: requestEnv}, http.StatusOK, wire.HeaderSessionEnv, hdr)
			mustUnmarshal(t, b, &res)
			return res.Stdout
		}, ""},
		{"streamed exec (NDJSON)", func(t *testing.T, e *sandboxdtest.Env) string {
			resp := e.Request(sandboxdtest.GRPCCtx(t), "POST", "/v1/exec", wire.ExecRequest{Command: sessionProbe, Env: requestEnv},
				"Accept", wire.ContentTypeNDJSON, wire.HeaderSessionEnv, hdr)
			defer resp.Body.Close()
			stdout, _, _ := sandboxdtest.NewFrameReader(t, resp.Body).Collect()
			return stdout
		}, ""},
		{"WebSocket exec with a terminal", func(t *testing.T, e *sandboxdtest.Env) string {
			ctx := sandboxdtest.GRPCCtx(t)
			url := "ws" + strings.TrimPrefix(e.TS.URL, "http") + "/v1/exec/ws"
			conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: e.TS.Client(),
				HTTPHeader: http.Header{wire.HeaderSessionEnv: {hdr}}})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.CloseNow()
			req, _ := json.Marshal(wire.ExecRequest{Command: sessionProbe, Env: requestEnv, TTY: true, Cols: 200, Rows: 10})
			if err := conn.Write(ctx, websocket.MessageText, req); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			for {
				_, data, err := conn.Read(ctx)
				if err != nil {
					t.Fatalf("reading the session: %v (stdout so far %q)", err, out.String())
				}
				var f wire.Frame
				mustUnmarshal(t, data, &f)
				switch f.Type {
				case wire.FrameStdout:
					out.Write(f.Data)
				case wire.FrameExit:
					return strings.TrimSpace(out.String())
				}
			}
		}, ""},
		{"background process", func(t *testing.T, e *sandboxdtest.Env) string {
			var sp wire.StartProcessResponse
			b := e.Do("POST", "/v1/processes", wire.ExecRequest{Command: sessionProbe, Env: requestEnv}, http.StatusCreated, wire.HeaderSessionEnv, hdr)
			mustUnmarshal(t, b, &sp)
			var logs wire.ProcessLogs
			sandboxdtest.Eventually(t, "the background process's output", func() bool {
				e.DoJSON("GET", "/v1/processes/"+sp.ID+"/logs", nil, http.StatusOK, &logs)
				return logs.Stdout != ""
			})
			return logs.Stdout
		}, ""},
		{"legacy /execute (no env of its own: the session's TASK shows)", func(t *testing.T, e *sandboxdtest.Env) string {
			var res struct{ Stdout string }
			b := e.Do("POST", "/execute", map[string]string{"command": sessionProbe}, http.StatusOK, wire.HeaderSessionEnv, hdr)
			mustUnmarshal(t, b, &res)
			return res.Stdout
		}, "k-1|from the claim|u-7"},
		{"gRPC Execute on the HTTP port", func(t *testing.T, e *sandboxdtest.Env) string {
			return grpcProbe(t, sandboxdtest.GRPCOnHTTPPort(t, e), hdr)
		}, ""},
		{"gRPC Execute on its own port", func(t *testing.T, e *sandboxdtest.Env) string {
			return grpcProbe(t, sandboxdtest.GRPCOnOwnPort(t, e), hdr)
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == "" {
				want = wantProbe
			}
			if got := tc.run(t, sandboxdtest.New(t)); got != want {
				t.Fatalf("the process saw API_KEY|TASK|SANDBOX_USER = %q; want %q", got, want)
			}
		})
	}
}

func grpcProbe(t *testing.T, c processv1.ProcessServiceClient, hdr string) string {
	ctx := metadata.AppendToOutgoingContext(sandboxdtest.GRPCCtx(t), strings.ToLower(wire.HeaderSessionEnv), hdr)
	resp, err := c.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{
		Command: []string{"/bin/sh", "-c", sessionProbe}, EnvVars: requestEnv}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	return string(resp.GetStdout())
}

func TestWithoutTheHeaderNothingOfASessionIsSeen(t *testing.T) {
	e := sandboxdtest.New(t)
	var res wire.ExecResult
	e.DoJSON("POST", "/v1/exec", wire.ExecRequest{Command: sessionProbe}, http.StatusOK, &res)
	if res.Stdout != "||" {
		t.Fatalf("without a session the probe printed %q; want the variables unset", res.Stdout)
	}
}

func TestMetadataShowsTheSessionsSandboxVariables(t *testing.T) {
	e := sandboxdtest.New(t)
	var md wire.V1Metadata
	mustUnmarshal(t, e.Do("GET", "/v1/metadata", nil, http.StatusOK, wire.HeaderSessionEnv, sessionHeader(t)), &md)
	if md.Env["SANDBOX_USER"] != "u-7" || md.Env["API_KEY"] != "" {
		t.Fatalf("metadata env %v; want the session's SANDBOX_USER and none of its other variables", md.Env)
	}
}

func TestABadSessionHeaderIsRefused(t *testing.T) {
	e := sandboxdtest.New(t)
	b := e.Do("POST", "/v1/exec", wire.ExecRequest{Command: "true"}, http.StatusBadRequest, wire.HeaderSessionEnv, "not base64!")
	sandboxdtest.WantError(t, b, wire.HeaderSessionEnv+": not base64: illegal base64 data at input byte 3")

	ctx := metadata.AppendToOutgoingContext(sandboxdtest.GRPCCtx(t), strings.ToLower(wire.HeaderSessionEnv), "not base64!")
	_, err := sandboxdtest.GRPCOnHTTPPort(t, e).Execute(ctx, &processv1.ExecuteRequest{Config: shell("true")})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), wire.HeaderSessionEnv) {
		t.Fatalf("gRPC with a bad session header: %v; want InvalidArgument naming the header", err)
	}
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
}
