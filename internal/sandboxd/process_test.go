package sandboxd

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/wire"
)

func (e *testEnv) startProcess(req wire.ExecRequest) wire.StartProcessResponse {
	e.t.Helper()
	var sp wire.StartProcessResponse
	e.doJSON("POST", "/v1/processes", req, http.StatusCreated, &sp)
	if !strings.HasPrefix(sp.ID, "p-") {
		e.t.Fatalf("id %q", sp.ID)
	}
	return sp
}

func (e *testEnv) process(id string) wire.Process {
	e.t.Helper()
	var p wire.Process
	e.doJSON("GET", "/v1/processes/"+id, nil, http.StatusOK, &p)
	return p
}

func TestBackgroundProcessLifecycle(t *testing.T) {
	e := newEnv(t)
	sp := e.startProcess(wire.ExecRequest{
		Command: "echo out; echo err >&2; while [ ! -e stop ]; do sleep 0.02; done; exit 3",
		Env:     map[string]string{"X": "1"},
	})
	if sp.PID <= 0 {
		t.Fatalf("pid %d", sp.PID)
	}

	var list wire.ProcessList
	e.doJSON("GET", "/v1/processes", nil, http.StatusOK, &list)
	if len(list.Processes) != 1 {
		t.Fatalf("list %+v", list)
	}
	p := list.Processes[0]
	if p.ID != sp.ID || p.PID != sp.PID || !p.Running || p.ExitCode != nil || p.Command == "" || p.Cwd != "." {
		t.Fatalf("process %+v", p)
	}

	var logs wire.ProcessLogs
	eventually(t, "output in logs", func() bool {
		e.doJSON("GET", "/v1/processes/"+sp.ID+"/logs", nil, http.StatusOK, &logs)
		return logs.Stdout == "out\n" && logs.Stderr == "err\n"
	})

	e.writeFile("stop", "")
	eventually(t, "exit", func() bool { return !e.process(sp.ID).Running })
	p = e.process(sp.ID)
	if p.ExitCode == nil || *p.ExitCode != 3 || p.ExitedAt == nil {
		t.Fatalf("process %+v", p)
	}

	// Signalling an exited process is a conflict; deleting forgets it.
	wantError(t, e.do("POST", "/v1/processes/"+sp.ID+"/signal", wire.SignalRequest{Signal: "SIGTERM"}, http.StatusConflict), "process has exited")
	e.doJSON("DELETE", "/v1/processes/"+sp.ID, nil, http.StatusOK, &p)
	e.do("GET", "/v1/processes/"+sp.ID, nil, http.StatusNotFound)
}

func TestBackgroundProcessSignal(t *testing.T) {
	e := newEnv(t)
	sp := e.startProcess(wire.ExecRequest{Argv: []string{"sleep", "300"}})
	wantError(t, e.do("POST", "/v1/processes/"+sp.ID+"/signal", wire.SignalRequest{Signal: "SIGBOGUS"}, http.StatusBadRequest), `unknown signal "SIGBOGUS"`)
	var p wire.Process
	e.doJSON("POST", "/v1/processes/"+sp.ID+"/signal", wire.SignalRequest{Signal: "SIGKILL"}, http.StatusOK, &p)
	eventually(t, "exit", func() bool { return !e.process(sp.ID).Running })
	if p = e.process(sp.ID); *p.ExitCode != 137 {
		t.Fatalf("process %+v", p)
	}
}

func TestBackgroundProcessDeleteKillsGroup(t *testing.T) {
	e := newEnv(t)
	sp := e.startProcess(wire.ExecRequest{Command: "sleep 300 & echo $!; wait"})
	var logs wire.ProcessLogs
	eventually(t, "child pid", func() bool {
		e.doJSON("GET", "/v1/processes/"+sp.ID+"/logs", nil, http.StatusOK, &logs)
		return strings.HasSuffix(logs.Stdout, "\n")
	})
	child := parsePID(t, logs.Stdout)
	var p wire.Process
	e.doJSON("DELETE", "/v1/processes/"+sp.ID, nil, http.StatusOK, &p)
	if p.Running || p.ExitCode == nil {
		t.Fatalf("process after delete %+v", p)
	}
	waitGone(t, sp.PID)
	waitGone(t, child)
	e.do("DELETE", "/v1/processes/"+sp.ID, nil, http.StatusNotFound)
}

func TestBackgroundProcessFollowLogs(t *testing.T) {
	e := newEnv(t)
	sp := e.startProcess(wire.ExecRequest{Command: "echo a; while [ ! -e go ]; do sleep 0.02; done; echo b >&2; exit 4"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := e.request(ctx, "GET", "/v1/processes/"+sp.ID+"/logs?follow=true", nil)
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != wire.ContentTypeNDJSON {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	fr := newFrameReader(t, resp.Body)
	f, ok := fr.next()
	if !ok || f.Type != wire.FrameStdout || string(f.Data) != "a\n" {
		t.Fatalf("first frame %+v", f)
	}
	e.writeFile("go", "")
	_, stderr, exit := fr.collect()
	if stderr != "b\n" || exit.ExitCode != 4 {
		t.Fatalf("stderr %q exit %+v", stderr, exit)
	}
}

func TestBackgroundProcessTimeoutAndStartFailure(t *testing.T) {
	e := newEnv(t)
	sp := e.startProcess(wire.ExecRequest{Argv: []string{"sleep", "300"}, TimeoutSeconds: 0.2})
	eventually(t, "timeout", func() bool { return !e.process(sp.ID).Running })
	if p := e.process(sp.ID); !p.TimedOut || *p.ExitCode != 124 {
		t.Fatalf("process %+v", p)
	}

	sp = e.startProcess(wire.ExecRequest{Argv: []string{"no-such-binary-xyz"}})
	p := e.process(sp.ID)
	if p.Running || *p.ExitCode != 127 || sp.PID != 0 {
		t.Fatalf("process %+v", p)
	}
	var logs wire.ProcessLogs
	e.doJSON("GET", "/v1/processes/"+sp.ID+"/logs", nil, http.StatusOK, &logs)
	if !strings.Contains(logs.Stderr, "command not found") {
		t.Fatalf("logs %+v", logs)
	}
}

func TestBackgroundProcessLogsAreBounded(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ProcessLogBytes = 1000 })
	sp := e.startProcess(wire.ExecRequest{Command: "seq 1 10000"})
	eventually(t, "exit", func() bool { return !e.process(sp.ID).Running })
	var logs wire.ProcessLogs
	e.doJSON("GET", "/v1/processes/"+sp.ID+"/logs", nil, http.StatusOK, &logs)
	if len(logs.Stdout) != 1000 || !logs.StdoutTruncated || !strings.HasSuffix(logs.Stdout, "9999\n10000\n") {
		t.Fatalf("stdout %d bytes, truncated %v", len(logs.Stdout), logs.StdoutTruncated)
	}
}

func TestBackgroundProcessUnknownID(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/processes/p-nope"},
		{"GET", "/v1/processes/p-nope/logs"},
		{"POST", "/v1/processes/p-nope/signal"},
		{"DELETE", "/v1/processes/p-nope"},
	} {
		wantError(t, e.do(c.method, c.path, wire.SignalRequest{Signal: "TERM"}, http.StatusNotFound), "process not found")
	}
}

func TestServerCloseKillsBackgroundProcesses(t *testing.T) {
	e := newEnv(t)
	sp := e.startProcess(wire.ExecRequest{Argv: []string{"sleep", "300"}})
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, sp.PID)
}

func TestRingBuffer(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		writes []string
		from   int64
		want   string
		lost   bool
	}{
		{"empty", 4, nil, 0, "", false},
		{"fits", 8, []string{"abc", "de"}, 0, "abcde", false},
		{"wraps", 4, []string{"abc", "def"}, 0, "cdef", true},
		{"big write", 4, []string{"abcdefgh"}, 0, "efgh", true},
		{"from offset", 8, []string{"abc", "def"}, 4, "ef", false},
		{"offset at end", 8, []string{"abc"}, 3, "", false},
		{"exact fill", 3, []string{"a", "bc", "d"}, 1, "bcd", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRingBuffer(tc.size)
			for _, w := range tc.writes {
				r.Write([]byte(w))
			}
			got, next, lost := r.readFrom(tc.from)
			if string(got) != tc.want || lost != tc.lost || next != r.total {
				t.Fatalf("got %q lost %v next %d (total %d)", got, lost, next, r.total)
			}
		})
	}
}
