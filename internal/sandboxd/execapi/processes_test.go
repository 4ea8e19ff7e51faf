package execapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

func startProcess(e *sandboxdtest.Env, req wire.ExecRequest) wire.StartProcessResponse {
	e.T.Helper()
	var sp wire.StartProcessResponse
	e.DoJSON("POST", "/v1/processes", req, http.StatusCreated, &sp)
	if !strings.HasPrefix(sp.ID, "p-") {
		e.T.Fatalf("id %q", sp.ID)
	}
	return sp
}

func getProcess(e *sandboxdtest.Env, id string) wire.Process {
	e.T.Helper()
	var p wire.Process
	e.DoJSON("GET", "/v1/processes/"+id, nil, http.StatusOK, &p)
	return p
}

func TestBackgroundProcessLifecycle(t *testing.T) {
	e := sandboxdtest.New(t)
	sp := startProcess(e, wire.ExecRequest{
		Command: "echo out; echo err >&2; while [ ! -e stop ]; do sleep 0.02; done; exit 3",
		Env:     map[string]string{"X": "1"},
	})
	if sp.PID <= 0 {
		t.Fatalf("pid %d", sp.PID)
	}

	var list wire.ProcessList
	e.DoJSON("GET", "/v1/processes", nil, http.StatusOK, &list)
	if len(list.Processes) != 1 {
		t.Fatalf("list %+v", list)
	}
	p := list.Processes[0]
	if p.ID != sp.ID || p.PID != sp.PID || !p.Running || p.ExitCode != nil || p.Command == "" || p.Cwd != "." {
		t.Fatalf("process %+v", p)
	}

	var logs wire.ProcessLogs
	sandboxdtest.Eventually(t, "output in logs", func() bool {
		e.DoJSON("GET", "/v1/processes/"+sp.ID+"/logs", nil, http.StatusOK, &logs)
		return logs.Stdout == "out\n" && logs.Stderr == "err\n"
	})

	e.WriteFile("stop", "")
	sandboxdtest.Eventually(t, "exit", func() bool { return !getProcess(e, sp.ID).Running })
	p = getProcess(e, sp.ID)
	if p.ExitCode == nil || *p.ExitCode != 3 || p.ExitedAt == nil {
		t.Fatalf("process %+v", p)
	}

	// Signalling an exited process is a conflict; deleting forgets it.
	sandboxdtest.WantError(t, e.Do("POST", "/v1/processes/"+sp.ID+"/signal", wire.SignalRequest{Signal: "SIGTERM"}, http.StatusConflict), "process has exited")
	e.DoJSON("DELETE", "/v1/processes/"+sp.ID, nil, http.StatusOK, &p)
	e.Do("GET", "/v1/processes/"+sp.ID, nil, http.StatusNotFound)
}

func TestBackgroundProcessSignal(t *testing.T) {
	e := sandboxdtest.New(t)
	sp := startProcess(e, wire.ExecRequest{Argv: []string{"sleep", "300"}})
	sandboxdtest.WantError(t, e.Do("POST", "/v1/processes/"+sp.ID+"/signal", wire.SignalRequest{Signal: "SIGBOGUS"}, http.StatusBadRequest), `unknown signal "SIGBOGUS"`)
	var p wire.Process
	e.DoJSON("POST", "/v1/processes/"+sp.ID+"/signal", wire.SignalRequest{Signal: "SIGKILL"}, http.StatusOK, &p)
	sandboxdtest.Eventually(t, "exit", func() bool { return !getProcess(e, sp.ID).Running })
	if p = getProcess(e, sp.ID); *p.ExitCode != 137 {
		t.Fatalf("process %+v", p)
	}
}

func TestBackgroundProcessDeleteKillsGroup(t *testing.T) {
	e := sandboxdtest.New(t)
	sp := startProcess(e, wire.ExecRequest{Command: "sleep 300 & echo $!; wait"})
	var logs wire.ProcessLogs
	sandboxdtest.Eventually(t, "child pid", func() bool {
		e.DoJSON("GET", "/v1/processes/"+sp.ID+"/logs", nil, http.StatusOK, &logs)
		return strings.HasSuffix(logs.Stdout, "\n")
	})
	child := sandboxdtest.ParsePID(t, logs.Stdout)
	var p wire.Process
	e.DoJSON("DELETE", "/v1/processes/"+sp.ID, nil, http.StatusOK, &p)
	if p.Running || p.ExitCode == nil {
		t.Fatalf("process after delete %+v", p)
	}
	sandboxdtest.WaitGone(t, sp.PID)
	sandboxdtest.WaitGone(t, child)
	e.Do("DELETE", "/v1/processes/"+sp.ID, nil, http.StatusNotFound)
}

func TestBackgroundProcessFollowLogs(t *testing.T) {
	e := sandboxdtest.New(t)
	sp := startProcess(e, wire.ExecRequest{Command: "echo a; while [ ! -e go ]; do sleep 0.02; done; echo b >&2; exit 4"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := e.Request(ctx, "GET", "/v1/processes/"+sp.ID+"/logs?follow=true", nil)
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != wire.ContentTypeNDJSON {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	fr := sandboxdtest.NewFrameReader(t, resp.Body)
	f, ok := fr.Next()
	if !ok || f.Type != wire.FrameStdout || string(f.Data) != "a\n" {
		t.Fatalf("first frame %+v", f)
	}
	e.WriteFile("go", "")
	_, stderr, exit := fr.Collect()
	if stderr != "b\n" || exit.ExitCode != 4 {
		t.Fatalf("stderr %q exit %+v", stderr, exit)
	}
}

func TestBackgroundProcessTimeoutAndStartFailure(t *testing.T) {
	e := sandboxdtest.New(t)
	sp := startProcess(e, wire.ExecRequest{Argv: []string{"sleep", "300"}, TimeoutSeconds: 0.2})
	sandboxdtest.Eventually(t, "timeout", func() bool { return !getProcess(e, sp.ID).Running })
	if p := getProcess(e, sp.ID); !p.TimedOut || *p.ExitCode != 124 {
		t.Fatalf("process %+v", p)
	}

	sp = startProcess(e, wire.ExecRequest{Argv: []string{"no-such-binary-xyz"}})
	p := getProcess(e, sp.ID)
	if p.Running || *p.ExitCode != 127 || sp.PID != 0 {
		t.Fatalf("process %+v", p)
	}
	var logs wire.ProcessLogs
	e.DoJSON("GET", "/v1/processes/"+sp.ID+"/logs", nil, http.StatusOK, &logs)
	if !strings.Contains(logs.Stderr, "command not found") {
		t.Fatalf("logs %+v", logs)
	}
}

func TestBackgroundProcessLogsAreBounded(t *testing.T) {
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.ProcessLogBytes = 1000 })
	sp := startProcess(e, wire.ExecRequest{Command: "seq 1 10000"})
	sandboxdtest.Eventually(t, "exit", func() bool { return !getProcess(e, sp.ID).Running })
	var logs wire.ProcessLogs
	e.DoJSON("GET", "/v1/processes/"+sp.ID+"/logs", nil, http.StatusOK, &logs)
	if len(logs.Stdout) != 1000 || !logs.StdoutTruncated || !strings.HasSuffix(logs.Stdout, "9999\n10000\n") {
		t.Fatalf("stdout %d bytes, truncated %v", len(logs.Stdout), logs.StdoutTruncated)
	}
}

func TestBackgroundProcessUnknownID(t *testing.T) {
	e := sandboxdtest.New(t)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/processes/p-nope"},
		{"GET", "/v1/processes/p-nope/logs"},
		{"POST", "/v1/processes/p-nope/signal"},
		{"DELETE", "/v1/processes/p-nope"},
	} {
		sandboxdtest.WantError(t, e.Do(c.method, c.path, wire.SignalRequest{Signal: "TERM"}, http.StatusNotFound), "process not found")
	}
}

func TestServerCloseKillsBackgroundProcesses(t *testing.T) {
	e := sandboxdtest.New(t)
	sp := startProcess(e, wire.ExecRequest{Argv: []string{"sleep", "300"}})
	if err := e.Srv.Close(); err != nil {
		t.Fatal(err)
	}
	sandboxdtest.WaitGone(t, sp.PID)
}
