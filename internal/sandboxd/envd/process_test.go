package envd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process"
)

func TestStartStreamsOutputAndEnd(t *testing.T) {
	e := newEnv(t)
	e.write("sub/marker", "")
	tests := []struct {
		name, script, cwd      string
		envs                   map[string]string
		stdout, stderr, status string
		exitCode               int32
		exited                 bool
		wantError              bool
	}{
		{name: "stdout", script: "echo hello", stdout: "hello\n", status: "exit status 0", exited: true},
		{name: "stderr and exit code", script: "echo oops >&2; exit 3", stderr: "oops\n", exitCode: 3, status: "exit status 3", exited: true, wantError: true},
		{name: "env and cwd", script: `echo "$GREETING"; ls`, envs: map[string]string{"GREETING": "hi"}, cwd: "/sub", stdout: "hi\nmarker\n", status: "exit status 0", exited: true},
		{name: "killed by a signal", script: "kill -9 $$", exitCode: -1, status: "signal: killed", wantError: true},
		{name: "not found in the shell", script: "no-such-command-x", exitCode: 127, status: "exit status 127", exited: true, wantError: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", tc.script}, Envs: tc.envs}}
			if tc.cwd != "" {
				req.Process.Cwd = &tc.cwd
			}
			s, err := e.proc.Start(t.Context(), connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			r, err := collect(t, s)
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if r.pid == 0 || r.end == nil {
				t.Fatalf("want a start event with a pid and an end event, got pid %d end %v", r.pid, r.end)
			}
			if r.stdout != tc.stdout || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stdout %q stderr %q, want %q and %q", r.stdout, r.stderr, tc.stdout, tc.stderr)
			}
			if r.end.GetExitCode() != tc.exitCode || r.end.GetExited() != tc.exited || r.end.GetStatus() != tc.status {
				t.Errorf("end %v, want exit code %d exited %v status %q", r.end, tc.exitCode, tc.exited, tc.status)
			}
			if (r.end.Error != nil) != tc.wantError || (tc.wantError && r.end.GetError() != tc.status) {
				t.Errorf("end error %v, want one (%v) equal to the status", r.end.Error, tc.wantError)
			}
		})
	}
}

func TestStartRefusesBadRequests(t *testing.T) {
	e := newEnv(t)
	e.write("file.txt", "x")
	str := func(s string) *string { return &s }
	tests := []struct {
		name string
		req  *pb.StartRequest
		want connect.Code
	}{
		{"no command", &pb.StartRequest{Process: &pb.ProcessConfig{}}, connect.CodeInvalidArgument},
		{"no process", &pb.StartRequest{}, connect.CodeInvalidArgument},
		{"missing executable", &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/no/such/binary"}}, connect.CodeInvalidArgument},
		{"cwd escapes the root", &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/true", Cwd: str("../..")}}, connect.CodePermissionDenied},
		{"cwd missing", &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/true", Cwd: str("/nope")}}, connect.CodeInvalidArgument},
		{"cwd is a file", &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/true", Cwd: str("/file.txt")}}, connect.CodeInvalidArgument},
		{"NUL in an argument", &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/echo", Args: []string{"a\x00b"}}}, connect.CodeInvalidArgument},
		{"bad env name", &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/true", Envs: map[string]string{"A=B": "x"}}}, connect.CodeInvalidArgument},
		{"terminal of size zero", &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh"}, Pty: &pb.PTY{Size: &pb.PTY_Size{}}}, connect.CodeInvalidArgument},
		{"terminal too wide", &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh"}, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 70000, Rows: 10}}}, connect.CodeInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := e.proc.Start(t.Context(), connect.NewRequest(tc.req))
			if err == nil {
				for s.Receive() {
					t.Errorf("unexpected event %v", s.Msg())
				}
				err = s.Err()
			}
			wantCode(t, "start", err, tc.want)
		})
	}
}

// The SDK runs command strings as /bin/bash -l -c; without bash they run
// under the sandbox's shell. Other missing commands still fail.
func TestMissingBashFallsBackToTheShell(t *testing.T) {
	e := newEnv(t)
	s, err := e.proc.Start(t.Context(), connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{
		Cmd: "/no/such/dir/bash", Args: []string{"-l", "-c", "echo via $0"}}}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := collect(t, s)
	if err != nil || r.stdout != "via /bin/sh\n" || r.end.GetExitCode() != 0 {
		t.Fatalf("stdout %q end %v err %v, want the command run by /bin/sh", r.stdout, r.end, err)
	}
	s, err = e.proc.Start(t.Context(), connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/no/such/dir/zsh"}}))
	if err == nil {
		_, err = collect(t, s)
	}
	wantCode(t, "another missing shell", err, connect.CodeInvalidArgument)
}

func TestStdinSendAndClose(t *testing.T) {
	e := newEnv(t)
	on := true
	s, pid := e.startShell(t.Context(), "cat; echo done", func(r *pb.StartRequest) { r.Stdin = &on })
	for _, chunk := range []string{"one ", "two\n"} {
		in := &pb.SendInputRequest{Process: pidSel(pid), Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte(chunk)}}}
		if _, err := e.proc.SendInput(t.Context(), connect.NewRequest(in)); err != nil {
			t.Fatal(err)
		}
	}
	pty := &pb.SendInputRequest{Process: pidSel(pid), Input: &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: []byte("x")}}}
	_, err := e.proc.SendInput(t.Context(), connect.NewRequest(pty))
	wantCode(t, "pty input to a process without a terminal", err, connect.CodeFailedPrecondition)
	if _, err := e.proc.CloseStdin(t.Context(), connect.NewRequest(&pb.CloseStdinRequest{Process: pidSel(pid)})); err != nil {
		t.Fatal(err)
	}
	r, err := collect(t, s)
	if err != nil || r.stdout != "one two\ndone\n" || r.end.GetExitCode() != 0 {
		t.Fatalf("stdout %q end %v err %v, want the input echoed, then done, exit 0", r.stdout, r.end, err)
	}

	// The SDK's default: no stdin. Input is refused, and the command sees EOF at once.
	off := false
	s, pid = e.startShell(t.Context(), "cat; echo eof; while [ ! -e stop ]; do sleep 0.02; done", func(r *pb.StartRequest) { r.Stdin = &off })
	in := &pb.SendInputRequest{Process: pidSel(pid), Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("x")}}}
	_, err = e.proc.SendInput(t.Context(), connect.NewRequest(in))
	wantCode(t, "stdin to a process started without it", err, connect.CodeFailedPrecondition)
	e.write("stop", "")
	r, err = collect(t, s)
	if err != nil || r.stdout != "eof\n" {
		t.Fatalf("stdout %q err %v, want only eof", r.stdout, err)
	}
}

func TestStreamInputFeedsInOrder(t *testing.T) {
	e := newEnv(t)
	on := true
	s, pid := e.startShell(t.Context(), "head -c 12", func(r *pb.StartRequest) { r.Stdin = &on })
	cs := e.proc.StreamInput(t.Context())
	msgs := []*pb.StreamInputRequest{
		{Event: &pb.StreamInputRequest_Start{Start: &pb.StreamInputRequest_StartEvent{Process: pidSel(pid)}}},
		{Event: &pb.StreamInputRequest_Keepalive{Keepalive: &pb.StreamInputRequest_KeepAlive{}}},
	}
	for _, part := range []string{"abc", "def", "ghi", "jkl"} {
		msgs = append(msgs, &pb.StreamInputRequest{Event: &pb.StreamInputRequest_Data{Data: &pb.StreamInputRequest_DataEvent{
			Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte(part)}}}}})
	}
	for _, m := range msgs {
		if err := cs.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CloseAndReceive(); err != nil {
		t.Fatal(err)
	}
	r, err := collect(t, s)
	if err != nil || r.stdout != "abcdefghijkl" {
		t.Fatalf("stdout %q err %v, want the chunks in order", r.stdout, err)
	}

	// Data before naming the process is refused.
	cs = e.proc.StreamInput(t.Context())
	_ = cs.Send(msgs[2])
	_, err = cs.CloseAndReceive()
	wantCode(t, "data before start", err, connect.CodeInvalidArgument)
}

func TestBackgroundConnectListAndKill(t *testing.T) {
	e := newEnv(t)
	tag := "server"
	ctx, disconnect := context.WithCancel(t.Context())
	s, pid := e.startShell(ctx, "echo up; sleep 60", func(r *pb.StartRequest) { r.Tag = &tag })
	disconnect() // the SDK's background run: the stream goes, the process stays
	_, _ = collect(t, s)

	list, err := e.proc.List(t.Context(), connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	ps := list.Msg.GetProcesses()
	if len(ps) != 1 || ps[0].GetPid() != pid || ps[0].GetTag() != tag || ps[0].GetConfig().GetCmd() != "/bin/sh" {
		t.Fatalf("list %v, want the one process %d tagged %q", ps, pid, tag)
	}

	conn, err := e.proc.Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: tag}}}))
	if err != nil {
		t.Fatal(err)
	}
	if !conn.Receive() || conn.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("connect: first event %v (%v), want the start event of %d", conn.Msg(), conn.Err(), pid)
	}
	sig := &pb.SendSignalRequest{Process: pidSel(pid), Signal: pb.Signal_SIGNAL_SIGKILL}
	if _, err := e.proc.SendSignal(t.Context(), connect.NewRequest(sig)); err != nil {
		t.Fatal(err)
	}
	r, err := collect(t, conn)
	if err != nil || r.end.GetExitCode() != -1 || r.end.GetStatus() != "signal: killed" {
		t.Fatalf("end %v err %v, want killed", r.end, err)
	}
	list, _ = e.proc.List(t.Context(), connect.NewRequest(&pb.ListRequest{}))
	if n := len(list.Msg.GetProcesses()); n != 0 {
		t.Fatalf("list has %d processes after the kill, want none", n)
	}
	_, err = e.proc.SendSignal(t.Context(), connect.NewRequest(sig))
	wantCode(t, "signal to an ended process", err, connect.CodeNotFound)

	// Connecting to an ended process replays its start and end.
	conn, err = e.proc.Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: pidSel(pid)}))
	if err != nil {
		t.Fatal(err)
	}
	r, err = collect(t, conn)
	if err != nil || r.pid != pid || r.end.GetStatus() != "signal: killed" {
		t.Fatalf("replay: pid %d end %v err %v, want start and end of %d", r.pid, r.end, err, pid)
	}
}

func TestSignalTerm(t *testing.T) {
	e := newEnv(t)
	s, pid := e.startShell(t.Context(), "trap 'echo bye; exit 7' TERM; echo ready; while :; do sleep 0.05; done")
	if !s.Receive() || string(s.Msg().GetEvent().GetData().GetStdout()) != "ready\n" {
		t.Fatalf("want ready first, got %v (%v)", s.Msg(), s.Err())
	}
	sig := &pb.SendSignalRequest{Process: pidSel(pid), Signal: pb.Signal_SIGNAL_SIGTERM}
	if _, err := e.proc.SendSignal(t.Context(), connect.NewRequest(sig)); err != nil {
		t.Fatal(err)
	}
	r, err := collect(t, s)
	if err != nil || r.stdout != "bye\n" || r.end.GetExitCode() != 7 {
		t.Fatalf("stdout %q end %v err %v, want the trap's bye and exit 7", r.stdout, r.end, err)
	}
	sig.Signal = pb.Signal_SIGNAL_UNSPECIFIED
	_, err = e.proc.SendSignal(t.Context(), connect.NewRequest(sig))
	wantCode(t, "unspecified signal", err, connect.CodeInvalidArgument)
}

func TestUnknownProcessIsNotFound(t *testing.T) {
	e := newEnv(t)
	missing := pidSel(1 << 30)
	byTag := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: "nope"}}
	calls := map[string]func() error{
		"SendInput": func() error {
			_, err := e.proc.SendInput(t.Context(), connect.NewRequest(&pb.SendInputRequest{Process: missing, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{}}}))
			return err
		},
		"SendSignal": func() error {
			_, err := e.proc.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: missing, Signal: pb.Signal_SIGNAL_SIGKILL}))
			return err
		},
		"CloseStdin": func() error {
			_, err := e.proc.CloseStdin(t.Context(), connect.NewRequest(&pb.CloseStdinRequest{Process: missing}))
			return err
		},
		"Update": func() error {
			_, err := e.proc.Update(t.Context(), connect.NewRequest(&pb.UpdateRequest{Process: missing}))
			return err
		},
		"Connect by tag": func() error {
			s, err := e.proc.Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: byTag}))
			if err != nil {
				return err
			}
			_, err = collect(t, s)
			return err
		},
	}
	for name, call := range calls {
		wantCode(t, name, call(), connect.CodeNotFound)
	}
	_, err := e.proc.SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Signal: pb.Signal_SIGNAL_SIGKILL}))
	wantCode(t, "no selector", err, connect.CodeInvalidArgument)
}

func TestPTYInputAndResize(t *testing.T) {
	e := newEnv(t)
	req := func(r *pb.StartRequest) { r.Pty = &pb.PTY{Size: &pb.PTY_Size{Cols: 80, Rows: 24}} }
	s, pid := e.startShell(t.Context(), "read line; stty size; read line; stty size; echo \"got $line\"", req)
	send := func(text string) {
		in := &pb.SendInputRequest{Process: pidSel(pid), Input: &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: []byte(text)}}}
		if _, err := e.proc.SendInput(t.Context(), connect.NewRequest(in)); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	waitFor := func(want string) {
		for !strings.Contains(out.String(), want) {
			if !s.Receive() {
				t.Fatalf("stream ended (%v) before %q; output %q", s.Err(), want, out.String())
			}
			if d := s.Msg().GetEvent().GetData(); d != nil {
				if len(d.GetStdout())+len(d.GetStderr()) > 0 {
					t.Fatalf("terminal output must come as pty data, got %v", d)
				}
				out.Write(d.GetPty())
			}
		}
	}
	send("first\n")
	waitFor("24 80")
	upd := &pb.UpdateRequest{Process: pidSel(pid), Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 100, Rows: 30}}}
	if _, err := e.proc.Update(t.Context(), connect.NewRequest(upd)); err != nil {
		t.Fatal(err)
	}
	stdin := &pb.SendInputRequest{Process: pidSel(pid), Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("x")}}}
	_, err := e.proc.SendInput(t.Context(), connect.NewRequest(stdin))
	wantCode(t, "stdin input to a terminal", err, connect.CodeFailedPrecondition)
	send("second\n")
	waitFor("30 100")
	waitFor("got second")
	r, err := collect(t, s)
	if err != nil || r.end.GetExitCode() != 0 {
		t.Fatalf("end %v err %v, want exit 0", r.end, err)
	}
}

func TestKeepaliveWhenQuiet(t *testing.T) {
	e := newEnv(t)
	e.header.Set("Keepalive-Ping-Interval", "1")
	s, _ := e.startShell(t.Context(), "sleep 2.5; echo done")
	r, err := collect(t, s)
	if err != nil || r.keepalives < 1 || r.stdout != "done\n" {
		t.Fatalf("keepalives %d stdout %q err %v, want at least one keepalive, then done", r.keepalives, r.stdout, err)
	}
}

func TestCallTimeoutEndsTheProcess(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	s, pid := e.startShell(ctx, "sleep 60")
	_, err := collect(t, s)
	wantCode(t, "stream past its timeout", err, connect.CodeDeadlineExceeded)
	eventually(t, "the process to be killed at the call's timeout", func() bool {
		list, err := e.proc.List(t.Context(), connect.NewRequest(&pb.ListRequest{}))
		return err == nil && len(list.Msg.GetProcesses()) == 0
	})
	conn, err := e.proc.Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: pidSel(pid)}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := collect(t, conn)
	if err != nil || r.end.GetExited() {
		t.Fatalf("end %v err %v, want killed by a signal", r.end, err)
	}
}
