package process_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// A request's stdin reaches the command, followed by EOF; without one the command reads
// /dev/null, never the daemon's own stdin.
func TestStdinOfACollectedCommand(t *testing.T) {
	big := strings.Repeat("z", 1<<20) // far more than a pipe holds
	tests := []struct {
		name       string
		req        wire.ExecRequest
		wantStdout string
	}{
		{"text", wire.ExecRequest{Argv: []string{"cat"}, Stdin: "hello\nworld"}, "hello\nworld"},
		{"base64, binary", wire.ExecRequest{Command: "od -An -tx1 | tr -d ' \\n'", StdinBase64: base64.StdEncoding.EncodeToString([]byte{0, 1, 0xfe, 0xff})}, "0001feff"},
		{"none: /dev/null", wire.ExecRequest{Command: "cat; echo eof"}, "eof\n"},
		{"more than a pipe holds", wire.ExecRequest{Command: "wc -c | tr -d ' '", Stdin: big}, "1048576\n"},
		{"a command that never reads it still ends", wire.ExecRequest{Command: "echo done", Stdin: big}, "done\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRunner(t)
			out, res := r.Collect(context.Background(), buildSpec(t, r, &tt.req), "test")
			if out.Stdout != tt.wantStdout || res.ExitCode != 0 {
				t.Fatalf("stdout %q (stderr %q), exit code %d; want %q, exit code 0", out.Stdout, out.Stderr, res.ExitCode, tt.wantStdout)
			}
		})
	}
}

// Interactive stdin arrives in the order it was sent, behind the request's own stdin, and
// SendEOF ends it.
func TestInteractiveStdinKeepsItsOrder(t *testing.T) {
	r := newRunner(t)
	out := newOutput()
	done, started := run(context.Background(), r, buildSpec(t, r, &wire.ExecRequest{Argv: []string{"cat"}, Stdin: "first "}), true, out)
	c := receive(t, started, "the command's start")
	var want strings.Builder
	want.WriteString("first ")
	for i := range 200 {
		chunk := string(rune('a'+i%26)) + " "
		c.SendStdin([]byte(chunk))
		want.WriteString(chunk)
	}
	out.waitFor(t, process.Stdout, want.String())
	c.SendEOF()
	res := receive(t, done, "the command's end after EOF")
	if got := out.String(process.Stdout); got != want.String() || res.ExitCode != 0 {
		t.Fatalf("stdout %q, exit code %d; want %q, exit code 0", got, res.ExitCode, want.String())
	}
	// After the command is gone, input is dropped rather than blocking the sender.
	c.SendStdin([]byte("late"))
	c.SendEOF()
}

// On a terminal, EOF is ^D typed at the start of a line: a line-reading command sees its input,
// then the end of it.
func TestInteractiveStdinOnATerminal(t *testing.T) {
	r := newRunner(t)
	out := newOutput()
	req := &wire.ExecRequest{Command: `while read -r line; do echo "got:$line"; done; echo bye`, TTY: true}
	done, started := run(context.Background(), r, buildSpec(t, r, req), true, out)
	c := receive(t, started, "the command's start")
	c.SendStdin([]byte("one\ntwo\n"))
	out.waitFor(t, process.Stdout, "got:two")
	c.SendEOF()
	if res := receive(t, done, "the command's end after ^D"); res.ExitCode != 0 {
		t.Fatalf("result %+v, want exit code 0", res)
	}
	if got := out.String(process.Stdout); !strings.Contains(got, "got:one") || !strings.Contains(got, "bye") {
		t.Fatalf("terminal output %q, want got:one, got:two, bye", got)
	}
}
