package sdk

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// firstB64 is how "first\n" travels in an output frame (base64, JSON's form of bytes).
const firstB64 = "Zmlyc3QK"

// A stream cut after the command started (the router or the pod died) ends the call at once
// with ErrConnectionLost naming it, after the output that came before the cut: the command may
// have run, and may be running still, so it is not sent again.
func TestAStreamCutMidwayIsAConnectionLost(t *testing.T) {
	cases := []struct {
		name string
		op   string
		opts func() []RunOption
	}{
		{"streamed output (NDJSON)", "POST /v1/exec", func() []RunOption { return nil }},
		{"WebSocket exec (stdin from a pipe)", "GET /v1/exec/ws", func() []RunOption {
			pr, pw := io.Pipe()
			t.Cleanup(func() { _ = pw.Close() })
			return []RunOption{WithStdin(pr)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlane(t, ModeRouter, func(o *Options) { o.RouterURL = newCutFront(t, o.RouterURL, 0, firstB64).url })
			var out testwrap.SyncBuffer
			_, err := p.sb.Run(testCtx(t), Shell("echo first; sleep 30; echo second"), append(tc.opts(), WithStdout(&out))...)
			if !errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), tc.op) {
				t.Fatalf("Run cut mid-stream: %v, want ErrConnectionLost naming %s", err, tc.op)
			}
			if got := out.String(); got != "first\n" {
				t.Fatalf("output before the cut %q, want %q", got, "first\n")
			}
		})
	}
}
