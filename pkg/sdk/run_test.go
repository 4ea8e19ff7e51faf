package sdk

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(t *testing.T, p *plane)
		cmd        Command
		opts       func() []RunOption // fresh per run: readers are consumed
		wantStdout string
		wantStderr string
		wantExit   int
		timedOut   bool
	}{
		{name: "shell pipes and variables", cmd: Shell(`x=hello; echo "$x world" | tr a-z A-Z`), wantStdout: "HELLO WORLD\n"},
		{name: "argv is not a shell", cmd: Argv("printf", "%s|%s", "a b", "$HOME"), wantStdout: "a b|$HOME"},
		{name: "stderr and exit code", cmd: Shell("echo oops >&2; exit 3"), wantStderr: "oops\n", wantExit: 3},
		{name: "missing program", cmd: Argv("no-such-program-sbx"), wantExit: 127},
		{name: "env per command", cmd: Shell(`echo "$GREETING $WHO"`),
			opts: func() []RunOption { return []RunOption{WithEnv(map[string]string{"GREETING": "hi", "WHO": "there"})} }, wantStdout: "hi there\n"},
		{name: "cwd", setup: func(t *testing.T, p *plane) { mkdirAll(t, p, "work/sub") },
			cmd: Shell("pwd | sed 's|.*/||'"), opts: func() []RunOption { return []RunOption{WithCwd("work/sub")} }, wantStdout: "sub\n"},
		{name: "in-memory stdin", cmd: Argv("wc", "-c"), opts: func() []RunOption { return []RunOption{WithStdin(strings.NewReader("12345"))} }, wantStdout: "5\n"},
		{name: "streamed stdin", cmd: Shell("tr a-z A-Z"), opts: func() []RunOption { return []RunOption{WithStdin(io.MultiReader(strings.NewReader("abc")))} }, wantStdout: "ABC"},
		{name: "timeout", cmd: Shell("sleep 30"), opts: func() []RunOption { return []RunOption{WithTimeout(200 * time.Millisecond)} }, wantExit: 124, timedOut: true},
	}
	for _, mode := range httpModes {
		for _, tc := range tests {
			t.Run(string(mode)+"/"+tc.name, func(t *testing.T) {
				p := newPlane(t, mode)
				if tc.setup != nil {
					tc.setup(t, p)
				}
				var opts []RunOption
				if tc.opts != nil {
					opts = tc.opts()
				}
				res, err := p.sb.Run(testCtx(t), tc.cmd, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.TrimLeft(res.Stdout, " "); got != tc.wantStdout {
					t.Errorf("stdout = %q, want %q", res.Stdout, tc.wantStdout)
				}
				if tc.wantStderr != "" && res.Stderr != tc.wantStderr {
					t.Errorf("stderr = %q, want %q", res.Stderr, tc.wantStderr)
				}
				if res.ExitCode != tc.wantExit || res.TimedOut != tc.timedOut {
					t.Errorf("exit = %d timedOut = %v, want %d %v (stderr %q)", res.ExitCode, res.TimedOut, tc.wantExit, tc.timedOut, res.Stderr)
				}
				if (res.Err() == nil) != (tc.wantExit == 0) {
					t.Errorf("Err() = %v", res.Err())
				}
			})
		}
	}
}

func mkdirAll(t *testing.T, p *plane, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(p.d.Root, dir), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestRunStreamsBeforeExit: the command waits for a file the test creates
// only after it saw the first output line, so the output must have arrived
// while the command was still running.
func TestRunStreamsBeforeExit(t *testing.T) {
	for _, mode := range httpModes {
		t.Run(string(mode), func(t *testing.T) {
			p := newPlane(t, mode)
			stdout := newSignalWriter("first")
			stderr := newSignalWriter("err-line")
			done := make(chan error, 1)
			var res *Result
			go func() {
				var err error
				res, err = p.sb.Run(testCtx(t), Shell(`echo first; echo err-line >&2; while [ ! -e go ]; do sleep 0.02; done; echo second`),
					WithStdout(stdout), WithStderr(stderr))
				done <- err
			}()
			<-stdout.seen
			<-stderr.seen
			if err := os.WriteFile(filepath.Join(p.d.Root, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := string(stdout.buf); got != "first\nsecond\n" {
				t.Errorf("streamed stdout = %q", got)
			}
			if res.Stdout != "" || res.ExitCode != 0 {
				t.Errorf("result = %+v, want empty stdout (it was streamed) and exit 0", res)
			}
		})
	}
}

// TestRunInteractiveStdin feeds stdin through a pipe: the echo of the first
// line must come back before the test sends the second and closes stdin.
func TestRunInteractiveStdin(t *testing.T) {
	for _, mode := range httpModes {
		t.Run(string(mode), func(t *testing.T) {
			p := newPlane(t, mode)
			pr, pw := io.Pipe()
			defer pr.Close()
			out := newSignalWriter("ONE")
			done := make(chan error, 1)
			var res *Result
			go func() {
				var err error
				res, err = p.sb.Run(testCtx(t), Shell(`while read l; do echo "$l" | tr a-z A-Z; done; echo bye`),
					WithStdin(pr), WithStdout(out))
				done <- err
			}()
			if _, err := io.WriteString(pw, "one\n"); err != nil {
				t.Fatal(err)
			}
			<-out.seen
			if _, err := io.WriteString(pw, "two\n"); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := string(out.buf); got != "ONE\nTWO\nbye\n" {
				t.Errorf("stdout = %q", got)
			}
			if res.ExitCode != 0 {
				t.Errorf("exit = %d", res.ExitCode)
			}
		})
	}
}

func TestRunTTY(t *testing.T) {
	p := newPlane(t, ModeDirect)
	resize := make(chan TermSize, 1)
	resize <- TermSize{Cols: 100, Rows: 40}
	close(resize)
	var out bytes.Buffer
	res, err := p.sb.Run(testCtx(t), Shell(`test -t 0 && test -t 1 && echo on-a-tty`), WithTTY(TTY{Cols: 80, Rows: 24, Resize: resize}),
		WithStdout(&out))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "on-a-tty") || res.ExitCode != 0 {
		t.Errorf("output %q exit %d", out.String(), res.ExitCode)
	}
}

func TestRunMaxOutput(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(map[bool]string{false: "buffered", true: "streamed"}[streamed], func(t *testing.T) {
			p := newPlane(t, ModeDirect)
			opts := []RunOption{WithMaxOutput(100)}
			var errBuf bytes.Buffer
			if streamed {
				opts = append(opts, WithStderr(&errBuf)) // stdout still collected, through the stream
			}
			res, err := p.sb.Run(testCtx(t), Shell("head -c 1000 /dev/zero"), opts...)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Stdout) != 100 || !res.Truncated {
				t.Errorf("stdout %d bytes truncated=%v, want 100 true", len(res.Stdout), res.Truncated)
			}
		})
	}
}

func TestRunContextCancelled(t *testing.T) {
	p := newPlane(t, ModeDirect)
	ctx, cancel := context.WithCancel(testCtx(t))
	out := newSignalWriter("started")
	done := make(chan error, 1)
	go func() {
		_, err := p.sb.Run(ctx, Shell("echo started; sleep 30"), WithStdout(out))
		done <- err
	}()
	<-out.seen
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestRunEmptyCommand(t *testing.T) {
	p := newPlane(t, ModeDirect)
	for _, cmd := range []Command{{}, Argv(), Shell("")} {
		if _, err := p.sb.Run(testCtx(t), cmd); err == nil {
			t.Errorf("Run(%#v) succeeded", cmd)
		}
	}
}
