package execapi_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

func TestExecBuffered(t *testing.T) {
	e := sandboxdtest.New(t)
	if err := os.Mkdir(filepath.Join(e.Root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  wire.ExecRequest
		want wire.ExecResult // DurationMs ignored
	}{
		{"argv", wire.ExecRequest{Argv: []string{"echo", "a b", "c"}}, wire.ExecResult{Stdout: "a b c\n"}},
		{"shell pipe", wire.ExecRequest{Command: "echo hi | wc -c | tr -d ' '"}, wire.ExecResult{Stdout: "3\n"}},
		{"stderr and exit code", wire.ExecRequest{Command: "echo oops >&2; exit 3"}, wire.ExecResult{Stderr: "oops\n", ExitCode: 3}},
		{"stdin", wire.ExecRequest{Argv: []string{"cat"}, Stdin: "from stdin"}, wire.ExecResult{Stdout: "from stdin"}},
		{"stdin base64", wire.ExecRequest{Argv: []string{"od", "-An", "-tx1"}, StdinBase64: base64.StdEncoding.EncodeToString([]byte{0, 255})}, wire.ExecResult{Stdout: " 00 ff\n"}},
		{"no stdin reads EOF", wire.ExecRequest{Command: "cat; echo done"}, wire.ExecResult{Stdout: "done\n"}},
		{"env", wire.ExecRequest{Command: `printf '%s/%s' "$FOO" "$BAR"`, Env: map[string]string{"FOO": "x y", "BAR": "2"}}, wire.ExecResult{Stdout: "x y/2"}},
		{"env PATH used for lookup", wire.ExecRequest{Argv: []string{"myscript"}, Env: map[string]string{"PATH": "/nonexistent"}}, wire.ExecResult{Stderr: "sandboxd: myscript: command not found\n", ExitCode: 127}},
		{"cwd relative", wire.ExecRequest{Argv: []string{"pwd"}, Cwd: "sub"}, wire.ExecResult{Stdout: e.Root + "/sub\n"}},
		{"cwd root-absolute", wire.ExecRequest{Argv: []string{"pwd"}, Cwd: "/sub"}, wire.ExecResult{Stdout: e.Root + "/sub\n"}},
		{"cwd default is root", wire.ExecRequest{Argv: []string{"pwd"}}, wire.ExecResult{Stdout: e.Root + "\n"}},
		{"not found", wire.ExecRequest{Argv: []string{"no-such-binary-xyz"}}, wire.ExecResult{Stderr: "sandboxd: no-such-binary-xyz: command not found\n", ExitCode: 127}},
		{"not found by path", wire.ExecRequest{Argv: []string{"/no/such/bin"}}, wire.ExecResult{Stderr: "sandboxd: /no/such/bin: no such file or directory\n", ExitCode: 127}},
		{"shell not found", wire.ExecRequest{Command: "no-such-binary-xyz 2>/dev/null"}, wire.ExecResult{ExitCode: 127}},
		{"killed by signal", wire.ExecRequest{Command: "kill -9 $$"}, wire.ExecResult{ExitCode: 137}},
		{"stdout truncated", wire.ExecRequest{Command: "head -c 100 /dev/zero | tr '\\0' x", MaxOutputBytes: 10}, wire.ExecResult{Stdout: "xxxxxxxxxx", StdoutTruncated: true, Truncated: true}},
		{"stderr truncated", wire.ExecRequest{Command: "echo 123456 >&2", MaxOutputBytes: 3}, wire.ExecResult{Stderr: "123", StderrTruncated: true, Truncated: true}},
		{"exactly at limit", wire.ExecRequest{Command: "printf abc", MaxOutputBytes: 3}, wire.ExecResult{Stdout: "abc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got wire.ExecResult
			e.DoJSON("POST", "/v1/exec", tc.req, http.StatusOK, &got)
			got.DurationMs = 0
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestExecBadRequests(t *testing.T) {
	e := sandboxdtest.New(t)
	e.WriteFile("file", "x")
	tests := []struct {
		name   string
		body   any
		status int
		msg    string
	}{
		{"argv and command", wire.ExecRequest{Argv: []string{"true"}, Command: "true"}, 400, "set either argv or command, not both"},
		{"neither", wire.ExecRequest{}, 400, "argv or command is required"},
		{"negative timeout", wire.ExecRequest{Argv: []string{"true"}, TimeoutSeconds: -1}, 400, "timeoutSeconds must not be negative"},
		{"both stdins", wire.ExecRequest{Argv: []string{"true"}, Stdin: "a", StdinBase64: "YQ=="}, 400, "set either stdin or stdinBase64, not both"},
		{"bad env", wire.ExecRequest{Argv: []string{"true"}, Env: map[string]string{"A=B": "c"}}, 400, `invalid environment variable "A=B"`},
		{"cwd escapes", wire.ExecRequest{Argv: []string{"true"}, Cwd: "../.."}, 403, "path escapes the sandbox root"},
		{"cwd missing", wire.ExecRequest{Argv: []string{"true"}, Cwd: "nope"}, 400, `cwd "nope": no such file or directory`},
		{"cwd is a file", wire.ExecRequest{Argv: []string{"true"}, Cwd: "file"}, 400, `cwd "file" is not a directory`},
		{"tty needs websocket", wire.ExecRequest{Argv: []string{"true"}, TTY: true}, 400, "tty is only supported on /v1/exec/ws"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sandboxdtest.WantError(t, e.Do("POST", "/v1/exec", tc.body, tc.status), tc.msg)
		})
	}
	b := e.Do("POST", "/v1/exec", "{not json", http.StatusBadRequest)
	if !strings.Contains(string(b), "invalid JSON body") {
		t.Fatalf("body %s", b)
	}
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	e := sandboxdtest.New(t)
	// The shell prints its background child's pid and waits; the timeout
	// must take the child down too, not only the shell.
	var res wire.ExecResult
	e.DoJSON("POST", "/v1/exec", wire.ExecRequest{
		Command:        "sleep 300 & echo $!; wait",
		TimeoutSeconds: 0.5,
	}, http.StatusOK, &res)
	if !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("result %+v, want timedOut with exit code 124", res)
	}
	sandboxdtest.WaitGone(t, sandboxdtest.ParsePID(t, res.Stdout))
}

func TestExecDefaultTimeout(t *testing.T) {
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.ExecTimeout = 300 * time.Millisecond })
	var res wire.ExecResult
	e.DoJSON("POST", "/v1/exec", wire.ExecRequest{Argv: []string{"sleep", "300"}}, http.StatusOK, &res)
	if !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("result %+v", res)
	}
}

func TestExecServerOutputCap(t *testing.T) {
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.MaxOutput = 5 })
	var res wire.ExecResult
	// A client may lower the cap but not raise it.
	e.DoJSON("POST", "/v1/exec", wire.ExecRequest{Command: "echo 0123456789", MaxOutputBytes: 1000}, http.StatusOK, &res)
	if res.Stdout != "01234" || !res.StdoutTruncated || !res.Truncated {
		t.Fatalf("result %+v, want stdout 01234 with stdoutTruncated and truncated set", res)
	}
}

// TestExecLargeOutput: 17 MiB of stdout arrives whole with the default cap.
func TestExecLargeOutput(t *testing.T) {
	e := sandboxdtest.New(t)
	const n = 17 << 20
	var res wire.ExecResult
	e.DoJSON("POST", "/v1/exec", wire.ExecRequest{Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' y", n)}, http.StatusOK, &res)
	if len(res.Stdout) != n || res.Truncated || res.ExitCode != 0 || strings.Trim(res.Stdout, "y") != "" {
		t.Fatalf("stdout %d bytes, truncated %v, exit %d; want %d bytes of y, not truncated, 0", len(res.Stdout), res.Truncated, res.ExitCode, n)
	}
}

func ndjsonExec(t *testing.T, ctx context.Context, e *sandboxdtest.Env, req wire.ExecRequest) (*http.Response, *sandboxdtest.FrameReader) {
	t.Helper()
	resp := e.Request(ctx, "POST", "/v1/exec", req, "Accept", wire.ContentTypeNDJSON)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != wire.ContentTypeNDJSON {
		t.Fatalf("content type %q", ct)
	}
	return resp, sandboxdtest.NewFrameReader(t, resp.Body)
}

func TestExecStreamDeliversOutputBeforeExit(t *testing.T) {
	e := sandboxdtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The command blocks after "a" until the test creates the file "go",
	// which it only does after it has received "a": without real streaming
	// this would hang.
	resp, fr := ndjsonExec(t, ctx, e, wire.ExecRequest{
		Command: "echo a; echo err-a >&2; while [ ! -e go ]; do sleep 0.02; done; echo b",
	})
	defer resp.Body.Close()
	seen := map[string]bool{}
	for !seen["stdout:a\n"] || !seen["stderr:err-a\n"] {
		f, ok := fr.Next()
		if !ok {
			t.Fatal("stream ended early")
		}
		if f.Type == wire.FrameExit {
			t.Fatal("exit frame before the command was released")
		}
		seen[f.Type+":"+string(f.Data)] = true
	}
	e.WriteFile("go", "")
	stdout, _, exit := fr.Collect()
	if stdout != "b\n" || exit.ExitCode != 0 || exit.TimedOut {
		t.Fatalf("stdout %q exit %+v", stdout, exit)
	}
}

func TestExecStreamOrderAndVolume(t *testing.T) {
	e := sandboxdtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, fr := ndjsonExec(t, ctx, e, wire.ExecRequest{Command: "seq 1 50000; seq 1 20000 >&2; exit 5"})
	defer resp.Body.Close()
	stdout, stderr, exit := fr.Collect()
	seq := func(n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString(strconv.Itoa(i))
			b.WriteByte('\n')
		}
		return b.String()
	}
	if stdout != seq(50000) || stderr != seq(20000) {
		t.Fatalf("output out of order or incomplete: %d/%d bytes", len(stdout), len(stderr))
	}
	if exit.ExitCode != 5 {
		t.Fatalf("exit %+v", exit)
	}
}

func TestExecStreamStartFailureAndTimeout(t *testing.T) {
	e := sandboxdtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, fr := ndjsonExec(t, ctx, e, wire.ExecRequest{Argv: []string{"no-such-binary-xyz"}})
	_, stderr, exit := fr.Collect()
	resp.Body.Close()
	if exit.ExitCode != 127 || !strings.Contains(stderr, "command not found") {
		t.Fatalf("stderr %q exit %+v", stderr, exit)
	}
	resp, fr = ndjsonExec(t, ctx, e, wire.ExecRequest{Argv: []string{"sleep", "300"}, TimeoutSeconds: 0.2})
	_, _, exit = fr.Collect()
	resp.Body.Close()
	if exit.ExitCode != 124 || !exit.TimedOut {
		t.Fatalf("exit %+v", exit)
	}
}

func TestExecStreamClientDisconnectKills(t *testing.T) {
	e := sandboxdtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reqCtx, disconnect := context.WithCancel(ctx)
	resp, fr := ndjsonExec(t, reqCtx, e, wire.ExecRequest{Command: "sleep 300 & echo $!; wait"})
	f, ok := fr.Next()
	if !ok || f.Type != wire.FrameStdout {
		t.Fatalf("first frame %+v", f)
	}
	disconnect()
	resp.Body.Close()
	sandboxdtest.WaitGone(t, sandboxdtest.ParsePID(t, string(f.Data)))
}

func TestExecBufferedClientDisconnectKills(t *testing.T) {
	e := sandboxdtest.New(t)
	pidFile := filepath.Join(e.Root, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", e.TS.URL+"/v1/exec",
			strings.NewReader(`{"command":"sleep 300 & echo $! > pid.tmp; mv pid.tmp pid; wait"}`))
		if resp, err := e.TS.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var pid int
	sandboxdtest.Eventually(t, "pid file", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid = sandboxdtest.ParsePID(t, string(b))
		return true
	})
	cancel()
	<-done
	sandboxdtest.WaitGone(t, pid)
}

func TestExecStreamSlowClientGetsAllOutput(t *testing.T) {
	e := sandboxdtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const size = 8 << 20 // far more than the pipe and frame buffers hold
	resp, fr := ndjsonExec(t, ctx, e, wire.ExecRequest{Command: "head -c 8388608 /dev/zero"})
	defer resp.Body.Close()
	f, ok := fr.Next()
	if !ok {
		t.Fatal("no frames")
	}
	// Stall well past process.DrainGrace while the command has long exited: the
	// rest of its output must still arrive.
	time.Sleep(process.DrainGrace + 500*time.Millisecond)
	stdout, _, exit := fr.Collect()
	if got := len(f.Data) + len(stdout); got != size || exit.ExitCode != 0 {
		t.Fatalf("got %d bytes, exit %+v", got, exit)
	}
}

func TestExecDoesNotWaitForDaemonizedChildren(t *testing.T) {
	e := sandboxdtest.New(t)
	// The background sleep keeps stdout open; the exec still returns once
	// the shell exits (after process.DrainGrace), and the child is left alone.
	var res wire.ExecResult
	e.DoJSON("POST", "/v1/exec", wire.ExecRequest{Command: "sleep 60 & echo $!"}, http.StatusOK, &res)
	pid := sandboxdtest.ParsePID(t, res.Stdout)
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL); sandboxdtest.WaitGone(t, pid) }()
	if res.ExitCode != 0 || res.TimedOut || sandboxdtest.ProcessGone(pid) {
		t.Fatalf("result %+v, child gone %v", res, sandboxdtest.ProcessGone(pid))
	}
}
