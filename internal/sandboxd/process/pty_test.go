package process_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// The terminal a TTY command gets has the size the request asked for, 80x24 by default, and is
// the command's stdin and stdout.
func TestPTYStartsWithTheRequestedSize(t *testing.T) {
	tests := []struct {
		name       string
		cols, rows uint16
		want       string // stty size: rows cols
	}{
		{"default", 0, 0, "24 80"},
		{"requested", 100, 30, "30 100"},
		{"rows only", 0, 50, "50 80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRunner(t)
			req := &wire.ExecRequest{Command: "test -t 0 && test -t 1 && echo on-a-tty; stty size", TTY: true, Cols: tt.cols, Rows: tt.rows}
			out, res := r.Collect(context.Background(), buildSpec(t, r, req), "test")
			if res.ExitCode != 0 || !strings.Contains(out.Stdout, "on-a-tty") || !strings.Contains(out.Stdout, tt.want) {
				t.Fatalf("exit %d, output %q; want exit 0, on-a-tty and size %q", res.ExitCode, out.Stdout, tt.want)
			}
		})
	}
}

// Resize reaches the running process: its terminal reports the new size.
func TestPTYResizeReachesTheProcess(t *testing.T) {
	r := newRunner(t)
	out := newOutput()
	// One size report per line of input, until EOF.
	req := &wire.ExecRequest{Command: `while read -r line; do echo "size=$(stty size)"; done`, TTY: true}
	done, started := run(context.Background(), r, buildSpec(t, r, req), true, out)
	c := receive(t, started, "the command's start")
	if !c.HasTTY() {
		t.Fatal("HasTTY() = false for a TTY command")
	}
	c.SendStdin([]byte("\n"))
	out.waitFor(t, process.Stdout, "size=24 80")
	for _, size := range []struct {
		cols, rows uint16
		want       string
	}{{120, 40, "size=40 120"}, {20, 5, "size=5 20"}} {
		if err := c.Resize(size.cols, size.rows); err != nil {
			t.Fatalf("Resize(%d, %d): %v", size.cols, size.rows, err)
		}
		c.SendStdin([]byte("\n"))
		out.waitFor(t, process.Stdout, size.want)
	}
	c.SendEOF()
	if res := receive(t, done, "the command's end after EOF"); res.ExitCode != 0 {
		t.Fatalf("result %+v, want exit code 0 after ^D; output %q", res, out.String(process.Stdout))
	}
}

// Resize of a command without a terminal does nothing and fails nothing.
func TestResizeWithoutATTYIsANoOp(t *testing.T) {
	r := newRunner(t)
	done, started := run(context.Background(), r, buildSpec(t, r, &wire.ExecRequest{Argv: []string{"cat"}}), true, newOutput())
	c := receive(t, started, "the command's start")
	if c.HasTTY() {
		t.Fatal("HasTTY() = true for a command on pipes")
	}
	if err := c.Resize(100, 30); err != nil {
		t.Fatalf("Resize without a TTY: %v", err)
	}
	c.SendEOF()
	receive(t, done, "the command's end after EOF")
}

// A shell with job control on a terminal puts a background job in a process group of its own;
// Kill still reaches it, through the session.
func TestKillOnATerminalReachesJobsInOtherGroups(t *testing.T) {
	r := newRunner(t)
	out := newOutput()
	req := &wire.ExecRequest{Command: `set -m; sleep 1000 & echo "job=$!"; wait`, TTY: true}
	done, started := run(context.Background(), r, buildSpec(t, r, req), true, out)
	c := receive(t, started, "the command's start")
	job := out.waitForNumber(t, process.Stdout, "job=")
	for _, p := range processes(t) {
		if p.pid == job && p.pgrp == c.PID() {
			t.Fatalf("the background job %d shares the shell's group %d: job control is off, the test proves nothing", job, c.PID())
		}
	}
	c.Kill()
	receive(t, done, "the command's end after Kill")
	waitDead(t, "the background job after Kill", job)
}
