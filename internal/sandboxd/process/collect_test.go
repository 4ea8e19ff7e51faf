package process_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Collect keeps each stream up to the cap (the server's, or the request's when lower) and says
// which streams were cut; it reads on past the cap, so a command that writes far more than a
// pipe holds still ends.
func TestCollectCapsEachStream(t *testing.T) {
	tests := []struct {
		name                   string
		command                string
		maxOutput              int64 // the request's; the server's is 1024
		wantStdout, wantStderr string
		wantOutCut, wantErrCut bool
	}{
		{"under the cap", "printf abc; printf de >&2", 10, "abc", "de", false, false},
		{"exactly the cap", "printf 0123456789", 10, "0123456789", "", false, false},
		{"stdout over the cap", "printf 0123456789AB; printf e >&2", 10, "0123456789", "e", true, false},
		{"stderr over the cap", "printf o; printf 0123456789AB >&2", 10, "o", "0123456789", false, true},
		{"both over the cap", "printf 0123456789AB; printf 0123456789CD >&2", 10, "0123456789", "0123456789", true, true},
		{"a request cannot raise the server's cap", "head -c 2000 /dev/zero | tr '\\0' x", 5000, strings.Repeat("x", 1024), "", true, false},
		{"no request cap: the server's", "head -c 1025 /dev/zero | tr '\\0' y", 0, strings.Repeat("y", 1024), "", true, false},
		{"far more than a pipe holds", "head -c 1000000 /dev/zero; echo done >&2", 10, strings.Repeat("\x00", 10), "done\n", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRunner(t)
			sp := buildSpec(t, r, &wire.ExecRequest{Command: tt.command, MaxOutputBytes: tt.maxOutput})
			out, res := r.Collect(context.Background(), sp, "buffered")
			if out.Stdout != tt.wantStdout || out.Stderr != tt.wantStderr {
				t.Errorf("stdout %q, stderr %q; want %q, %q", out.Stdout, out.Stderr, tt.wantStdout, tt.wantStderr)
			}
			if out.StdoutTruncated != tt.wantOutCut || out.StderrTruncated != tt.wantErrCut || out.Truncated != (tt.wantOutCut || tt.wantErrCut) {
				t.Errorf("truncated: stdout %v, stderr %v, any %v; want %v, %v, %v",
					out.StdoutTruncated, out.StderrTruncated, out.Truncated, tt.wantOutCut, tt.wantErrCut, tt.wantOutCut || tt.wantErrCut)
			}
			if out.ExitCode != 0 || res.ExitCode != 0 || out.TimedOut {
				t.Errorf("exit code %d (result %+v), timed out %v; want 0, not timed out", out.ExitCode, res, out.TimedOut)
			}
		})
	}
}

// Collect reports how the command ended to the Runner's observer, under the mode it was given.
func TestCollectObservesTheOutcome(t *testing.T) {
	type observation struct {
		mode     string
		exitCode int
	}
	var got []observation
	r := newRunner(t, func(c *process.Config) {
		c.Observe = func(mode string, res process.Result) { got = append(got, observation{mode, res.ExitCode}) }
	})
	r.Collect(context.Background(), buildSpec(t, r, &wire.ExecRequest{Command: "exit 7"}), "ndjson")
	if len(got) != 1 || got[0] != (observation{"ndjson", 7}) {
		t.Fatalf("observed %+v, want one observation of mode ndjson, exit code 7", got)
	}
}

// NoteTruncation, for the APIs without truncation fields, says on stderr which stream was cut
// and makes a success a failure; a command that failed keeps its exit code.
func TestNoteTruncation(t *testing.T) {
	r := newRunner(t)
	note := func(stream string) string {
		return "sandboxd: OUTPUT TRUNCATED: " + stream + " exceeded the output cap of 1024 bytes (sandboxd --max-output); only the first 1024 bytes are returned\n"
	}
	tests := []struct {
		name         string
		out          wire.ExecResult
		stderr       string
		exitCode     int
		wantStderr   string
		wantExitCode int
	}{
		{"nothing cut", wire.ExecResult{}, "warn", 0, "warn", 0},
		{"stdout cut", wire.ExecResult{StdoutTruncated: true, Truncated: true}, "", 0, note("stdout"), 1},
		{"stderr cut, after a line without newline", wire.ExecResult{StderrTruncated: true, Truncated: true}, "partial", 0, "partial\n" + note("stderr"), 1},
		{"both cut, a failure keeps its code", wire.ExecResult{StdoutTruncated: true, StderrTruncated: true, Truncated: true}, "e\n", 3, "e\n" + note("stdout") + note("stderr"), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stderr, code := r.NoteTruncation(tt.out, tt.stderr, tt.exitCode)
			if stderr != tt.wantStderr || code != tt.wantExitCode {
				t.Fatalf("got stderr %q, exit code %d; want %q, %d", stderr, code, tt.wantStderr, tt.wantExitCode)
			}
		})
	}
}
