package sdk

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExecModeRun drives ModeExec's command construction (env through
// `env`, cwd through `cd` in sh -c) with real local processes.
func TestExecModeRun(t *testing.T) {
	tests := []struct {
		name       string
		cmd        Command
		opts       func() []RunOption
		wantStdout string
		wantExit   int
		timedOut   bool
	}{
		{name: "shell", cmd: Shell(`echo "a b" | wc -w`), wantStdout: "2\n"},
		{name: "argv keeps arguments whole", cmd: Argv("printf", "[%s]", "a b", "$X"), wantStdout: "[a b][$X]"},
		{name: "env", cmd: Shell(`echo "$A-$B"`), opts: func() []RunOption { return []RunOption{WithEnv(map[string]string{"A": "1", "B": "two words"})} }, wantStdout: "1-two words\n"},
		{name: "cwd below the exec root", cmd: Argv("pwd"), opts: func() []RunOption { return []RunOption{WithCwd("sub")} }, wantStdout: "/sub\n"},
		{name: "stdin", cmd: Argv("tr", "a-z", "A-Z"), opts: func() []RunOption { return []RunOption{WithStdin(strings.NewReader("shout"))} }, wantStdout: "SHOUT"},
		{name: "exit code", cmd: Shell("exit 7"), wantExit: 7},
		{name: "timeout", cmd: Argv("sleep", "30"), opts: func() []RunOption { return []RunOption{WithTimeout(200 * time.Millisecond)} }, wantExit: 124, timedOut: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlane(t, ModeExec)
			mkdirAll(t, p, "sub")
			var opts []RunOption
			if tc.opts != nil {
				opts = tc.opts()
			}
			res, err := p.sb.Run(testCtx(t), tc.cmd, opts...)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Stdout
			if tc.name == "cwd below the exec root" {
				got = strings.TrimPrefix(got, p.d.Root)
			}
			if strings.TrimLeft(got, " ") != tc.wantStdout || res.ExitCode != tc.wantExit || res.TimedOut != tc.timedOut {
				t.Errorf("got %q exit %d timedOut %v (stderr %q)", res.Stdout, res.ExitCode, res.TimedOut, res.Stderr)
			}
		})
	}
}

func TestExecModeStreaming(t *testing.T) {
	p := newPlane(t, ModeExec)
	out := newSignalWriter("first")
	done := make(chan error, 1)
	go func() {
		_, err := p.sb.Run(testCtx(t), Shell(`echo first; while [ ! -e go ]; do sleep 0.02; done; echo second`),
			WithCwd("."), WithStdout(out), WithStderr(&bytes.Buffer{}))
		done <- err
	}()
	<-out.seen
	if err := os.WriteFile(filepath.Join(p.d.Root, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if string(out.buf) != "first\nsecond\n" {
		t.Errorf("stdout = %q", out.buf)
	}
}

func TestExecModeUnsupportedAndProcesses(t *testing.T) {
	ctx := testCtx(t)
	p := newPlane(t, ModeExec)
	if _, err := p.sb.Files().Watch(ctx, ".", false); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Watch = %v, want ErrUnsupported", err)
	}
	if _, err := p.sb.Processes(ctx); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Processes = %v, want ErrUnsupported", err)
	}
	proc, err := p.sb.Start(ctx, Argv("sleep", "300"))
	if err != nil {
		t.Fatal(err)
	}
	if proc.PID == 0 {
		t.Fatalf("Start = %+v", proc)
	}
	if _, err := p.sb.Kill(ctx, proc.ID); err != nil {
		t.Fatal(err)
	}
	// The process is gone once kill -0 fails; Kill again reports that.
	for {
		_, err := p.sb.Kill(ctx, proc.ID)
		if errors.Is(err, ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExecModeStat(t *testing.T) {
	ctx := testCtx(t)
	p := newPlane(t, ModeExec)
	f := p.sb.Files()
	if err := f.Write(ctx, "d/file.txt", []byte("12345"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file.txt", filepath.Join(p.d.Root, "d", "link")); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat(ctx, "d/file.txt")
	if err != nil || st.Size != 5 || st.Mode.Perm() != 0o640 || st.Path != "d/file.txt" || st.Name != "file.txt" {
		t.Errorf("Stat = %+v, %v", st, err)
	}
	ln, err := f.Stat(ctx, "d/link")
	if err != nil || !ln.IsSymlink || ln.LinkTarget != "file.txt" {
		t.Errorf("Stat link = %+v, %v", ln, err)
	}
	if _, err := f.Stat(ctx, "d/missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat missing = %v", err)
	}
	if _, err := f.List(ctx, "d/file.txt", false); !isStatus(err, 400) {
		t.Errorf("List of a file = %v, want 400", err)
	}
}
