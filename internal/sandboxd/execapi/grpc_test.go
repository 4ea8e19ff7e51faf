package execapi_test

import (
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	processv1 "github.com/agent-sandbox/agent-sandbox/pkg/proto/process/v1"
)

func shell(cmd string) *processv1.ProcessConfig {
	return &processv1.ProcessConfig{Command: []string{"/bin/sh", "-c", cmd}}
}

func TestGRPCExecute(t *testing.T) {
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.MaxOutput = 1000 })
	e.WriteFile("sub/f", "x")
	cwd := "sub"
	tests := []struct {
		name     string
		cfg      *processv1.ProcessConfig
		wantCode codes.Code
		wantExit int32
		wantOut  string
		wantErr  string // substring of stderr
	}{
		{"output and exit code", shell("echo out; echo err >&2; exit 3"), codes.OK, 3, "out\n", "err\n"},
		{"env and cwd", &processv1.ProcessConfig{Command: []string{"sh", "-c", "echo $GREETING; ls"}, EnvVars: map[string]string{"GREETING": "hi"}, Cwd: &cwd}, codes.OK, 0, "hi\nf\n", ""},
		{"killed by a signal is -1", shell("kill -9 $$"), codes.OK, -1, "", ""},
		{"over the cap is said", shell("head -c 1500 /dev/zero | tr '\\0' z"), codes.OK, 1, strings.Repeat("z", 1000), "OUTPUT TRUNCATED: stdout exceeded the output cap of 1000 bytes"},
		{"empty command", &processv1.ProcessConfig{}, codes.InvalidArgument, 0, "", ""},
		{"program not found", &processv1.ProcessConfig{Command: []string{"no-such-binary-xyz"}}, codes.NotFound, 0, "", ""},
		{"path not found", &processv1.ProcessConfig{Command: []string{"/no/such/bin"}}, codes.NotFound, 0, "", ""},
		{"cwd escapes", &processv1.ProcessConfig{Command: []string{"true"}, Cwd: ptr("../..")}, codes.PermissionDenied, 0, "", ""},
		{"cwd missing", &processv1.ProcessConfig{Command: []string{"true"}, Cwd: ptr("nope")}, codes.NotFound, 0, "", ""},
	}
	for _, via := range []struct {
		name   string
		client func(testing.TB, *sandboxdtest.Env) processv1.ProcessServiceClient
	}{{"http port", sandboxdtest.GRPCOnHTTPPort}, {"own port", sandboxdtest.GRPCOnOwnPort}} {
		c := via.client(t, e)
		for _, tc := range tests {
			t.Run(via.name+"/"+tc.name, func(t *testing.T) {
				resp, err := c.Execute(sandboxdtest.GRPCCtx(t), &processv1.ExecuteRequest{Config: tc.cfg})
				if status.Code(err) != tc.wantCode {
					t.Fatalf("Execute: %v, want code %v", err, tc.wantCode)
				}
				if err != nil {
					return
				}
				if resp.GetExitCode() != tc.wantExit || string(resp.GetStdout()) != tc.wantOut || !strings.Contains(string(resp.GetStderr()), tc.wantErr) {
					t.Fatalf("exit %d stdout %.80q stderr %.200q; want exit %d stdout %.80q stderr containing %q",
						resp.GetExitCode(), resp.GetStdout(), resp.GetStderr(), tc.wantExit, tc.wantOut, tc.wantErr)
				}
			})
		}
	}
}

func ptr[T any](v T) *T { return &v }

// startEvents collects a Start stream: the process id from the init event,
// the output and the exit code.
type startEvents struct {
	pid            int32
	stdout, stderr strings.Builder
	exit           *int32
}

func recvStart(t *testing.T, st grpc.ServerStreamingClient[processv1.StartResponse], ev *startEvents, until func(*startEvents) bool) {
	t.Helper()
	for !until(ev) {
		m, err := st.Recv()
		if err == io.EOF {
			t.Fatalf("stream ended early: stdout %q stderr %q", ev.stdout.String(), ev.stderr.String())
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		switch x := m.GetEvent().(type) {
		case *processv1.StartResponse_Init:
			ev.pid = x.Init.GetProcessId()
		case *processv1.StartResponse_Stdout:
			ev.stdout.Write(x.Stdout)
		case *processv1.StartResponse_Stderr:
			ev.stderr.Write(x.Stderr)
		case *processv1.StartResponse_Exit:
			code := x.Exit.GetExitCode()
			ev.exit = &code
		}
	}
}

func exited(ev *startEvents) bool { return ev.exit != nil }

func TestGRPCStart(t *testing.T) {
	e := sandboxdtest.New(t)
	c := sandboxdtest.GRPCOnHTTPPort(t, e)
	t.Run("init, output, exit", func(t *testing.T) {
		st, err := c.Start(sandboxdtest.GRPCCtx(t), &processv1.StartRequest{Config: shell("echo a; echo b >&2; exit 4")})
		if err != nil {
			t.Fatal(err)
		}
		var ev startEvents
		recvStart(t, st, &ev, exited)
		if ev.pid <= 0 || ev.stdout.String() != "a\n" || ev.stderr.String() != "b\n" || *ev.exit != 4 {
			t.Fatalf("pid %d stdout %q stderr %q exit %d; want a pid, a, b, 4", ev.pid, ev.stdout.String(), ev.stderr.String(), *ev.exit)
		}
	})
	t.Run("stdin then eof", func(t *testing.T) {
		st, err := c.Start(sandboxdtest.GRPCCtx(t), &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: []string{"cat"}}})
		if err != nil {
			t.Fatal(err)
		}
		var ev startEvents
		recvStart(t, st, &ev, func(ev *startEvents) bool { return ev.pid != 0 })
		for _, req := range []*processv1.WriteStdinRequest{
			{ProcessId: ev.pid, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("hello ")}},
			{ProcessId: ev.pid, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("world")}},
			{ProcessId: ev.pid, Payload: &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}},
		} {
			if _, err := c.WriteStdin(sandboxdtest.GRPCCtx(t), req); err != nil {
				t.Fatal(err)
			}
		}
		recvStart(t, st, &ev, exited)
		if ev.stdout.String() != "hello world" || *ev.exit != 0 {
			t.Fatalf("stdout %q exit %d, want the input echoed and 0", ev.stdout.String(), *ev.exit)
		}
	})
	t.Run("signal", func(t *testing.T) {
		st, err := c.Start(sandboxdtest.GRPCCtx(t), &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: []string{"sleep", "60"}}})
		if err != nil {
			t.Fatal(err)
		}
		var ev startEvents
		recvStart(t, st, &ev, func(ev *startEvents) bool { return ev.pid != 0 })
		if _, err := c.SendSignal(sandboxdtest.GRPCCtx(t), &processv1.SendSignalRequest{ProcessId: ev.pid}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("unspecified signal: %v, want InvalidArgument", err)
		}
		if _, err := c.ResizeTTY(sandboxdtest.GRPCCtx(t), &processv1.ResizeTTYRequest{ProcessId: ev.pid, Cols: 1, Rows: 1}); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("resize without a PTY: %v, want FailedPrecondition", err)
		}
		if _, err := c.SendSignal(sandboxdtest.GRPCCtx(t), &processv1.SendSignalRequest{ProcessId: ev.pid, Signal: processv1.Signal_SIGNAL_SIGTERM}); err != nil {
			t.Fatal(err)
		}
		recvStart(t, st, &ev, exited)
		if *ev.exit != -1 {
			t.Fatalf("exit %d, want -1 for a signal (as upstream)", *ev.exit)
		}
	})
	t.Run("pty and resize", func(t *testing.T) {
		st, err := c.Start(sandboxdtest.GRPCCtx(t), &processv1.StartRequest{Config: shell("read line; stty size"), Pty: &processv1.PTY{Cols: 80, Rows: 24}})
		if err != nil {
			t.Fatal(err)
		}
		var ev startEvents
		recvStart(t, st, &ev, func(ev *startEvents) bool { return ev.pid != 0 })
		if _, err := c.ResizeTTY(sandboxdtest.GRPCCtx(t), &processv1.ResizeTTYRequest{ProcessId: ev.pid, Cols: 100, Rows: 30}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteStdin(sandboxdtest.GRPCCtx(t), &processv1.WriteStdinRequest{ProcessId: ev.pid, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("go\n")}}); err != nil {
			t.Fatal(err)
		}
		recvStart(t, st, &ev, exited)
		if !strings.Contains(ev.stdout.String(), "30 100") || *ev.exit != 0 {
			t.Fatalf("terminal output %q exit %d, want the new size 30 100", ev.stdout.String(), *ev.exit)
		}
	})
	t.Run("unknown process", func(t *testing.T) {
		for name, err := range map[string]error{
			"WriteStdin": func() error {
				_, err := c.WriteStdin(sandboxdtest.GRPCCtx(t), &processv1.WriteStdinRequest{ProcessId: 999999})
				return err
			}(),
			"SendSignal": func() error {
				_, err := c.SendSignal(sandboxdtest.GRPCCtx(t), &processv1.SendSignalRequest{ProcessId: 999999, Signal: processv1.Signal_SIGNAL_SIGINT})
				return err
			}(),
			"ResizeTTY": func() error {
				_, err := c.ResizeTTY(sandboxdtest.GRPCCtx(t), &processv1.ResizeTTYRequest{ProcessId: 999999})
				return err
			}(),
		} {
			if status.Code(err) != codes.NotFound {
				t.Errorf("%s of an unknown process: %v, want NotFound", name, err)
			}
		}
	})
	t.Run("not found before init", func(t *testing.T) {
		st, err := c.Start(sandboxdtest.GRPCCtx(t), &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: []string{"no-such-binary-xyz"}}})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.NotFound {
			t.Fatalf("Start of a missing program: %v, want NotFound", err)
		}
	})
}
