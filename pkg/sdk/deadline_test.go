package sdk

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

// shortDefault stands for sandboxd's --exec-timeout (300s in production): a command longer
// than it, started without WithTimeout, must still run as long as the caller's context allows
// (the task workers run 30-minute commands).
const shortDefault = 500 * time.Millisecond

// newDeadlinePlane is newPlane with sandboxd's default command timeout set to shortDefault.
// ModePortForward is given an already open forward to the local sandboxd, so that its own
// endpoint (not the SPDY tunnel, which needs a kubelet) carries the requests.
func newDeadlinePlane(t *testing.T, mode Mode) *Sandbox {
	t.Helper()
	d := sdktest.NewSandboxd(t, sdktest.SandboxdOptions{ExecTimeout: shortDefault})
	o := Options{RESTConfig: offlineConfig, Mode: mode, SandboxPort: d.Port}
	switch mode {
	case ModeRouter:
		o.RouterURL = sdktest.NewRouter(t, "default/sb-1").URL
	case ModeExec:
		o.ExecRoot = d.Root
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	sb, err := c.HandleFor(testwrap.MakeClaim("default", "claim-1").Template("tmpl").ReadyWith("sb-1", "127.0.0.1").Obj())
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case ModeExec:
		sb.tr = newKubeExecTransport(c, sb, localRunner{dir: "/"})
	case ModePortForward:
		fw := &forward{local: uint16(d.Port), stop: make(chan struct{}), done: make(chan struct{})}
		go func() { <-fw.stop; close(fw.done) }()
		sb.tr = newHTTPTransport(c, &portForwardEndpoint{c: c, s: sb, fw: fw})
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

func TestRunTakesTheContextDeadlineAsTheCommandTimeout(t *testing.T) {
	long := Shell("sleep 1.5; echo done")
	cases := []struct {
		name     string
		modes    []Mode
		deadline time.Duration // 0: no deadline
		opts     []RunOption
		cmd      Command
		// want: exit code, stdout and TimedOut of the Result.
		wantExit   int
		wantStdout string
		timedOut   bool
	}{
		{name: "a command longer than the default runs to its end when the context allows",
			modes: Modes[1:], deadline: 30 * time.Second, cmd: long, wantStdout: "done\n"},
		{name: "without a deadline the default still ends it",
			modes: []Mode{ModeRouter, ModeDirect, ModePortForward}, cmd: Shell("sleep 5"), wantExit: 124, timedOut: true},
		{name: "WithTimeout shorter than the deadline wins",
			modes: Modes[1:], deadline: 30 * time.Second, opts: []RunOption{WithTimeout(200 * time.Millisecond)},
			cmd: Shell("sleep 5"), wantExit: 124, timedOut: true},
		{name: "WithTimeout longer than the default wins over it",
			modes: []Mode{ModeRouter, ModeDirect, ModePortForward}, opts: []RunOption{WithTimeout(30 * time.Second)}, cmd: long, wantStdout: "done\n"},
	}
	for _, tc := range cases {
		for _, mode := range tc.modes {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				t.Parallel()
				sb := newDeadlinePlane(t, mode)
				ctx := testCtx(t)
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				} else {
					ctx = context.WithoutCancel(ctx) // no deadline; sandboxd's default bounds the test
				}
				res, err := sb.Run(ctx, tc.cmd, tc.opts...)
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if res.ExitCode != tc.wantExit || strings.TrimSpace(res.Stdout) != strings.TrimSpace(tc.wantStdout) || res.TimedOut != tc.timedOut {
					t.Errorf("Run = exit %d stdout %q timedOut %v (stderr %q), want exit %d stdout %q timedOut %v",
						res.ExitCode, res.Stdout, res.TimedOut, res.Stderr, tc.wantExit, tc.wantStdout, tc.timedOut)
				}
			})
		}
	}
}

// A context that ends first still ends the call with the context's error: the deadline is a
// bound, not a promise to wait for the command.
func TestRunEndsWithTheContext(t *testing.T) {
	for _, mode := range Modes[1:] {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			sb := newDeadlinePlane(t, mode)
			ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			res, err := sb.Run(ctx, Shell("sleep 5"))
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("Run took %s, want it to end about when the 300ms context does", took)
			}
			if err == nil && !res.TimedOut {
				t.Errorf("Run = %+v, nil error; want the context's error or a timed-out result", res)
			}
		})
	}
}
