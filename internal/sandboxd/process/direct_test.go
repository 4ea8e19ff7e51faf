package process_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// A command string the shell would run exactly as its words say is exec'd directly; anything
// the shell would interpret, or could not run, still goes through it.
func TestACommandTheShellWouldOnlyExecIsExecdDirectly(t *testing.T) {
	r, root := newRunnerWithRoot(t)
	for name, mode := range map[string]os.FileMode{"tool": 0o755, "data.txt": 0o644} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := exec.LookPath("ls")
	if err != nil {
		t.Skip("no ls on PATH")
	}
	shell := func(command string) []string { return []string{"/bin/sh", "-c", command} }
	tests := []struct {
		name      string
		command   string
		env       map[string]string
		wantArgv  []string
		wantPath  string // "" when not checked
		wantShell bool
	}{
		{name: "a program and plain arguments", command: "ls -la /tmp", wantArgv: []string{"ls", "-la", "/tmp"}, wantPath: ls},
		{name: "blanks around and between the words", command: "  ls \t -l  ", wantArgv: []string{"ls", "-l"}, wantPath: ls},
		{name: "a program in the working directory", command: "./tool x=1 a,b k:v", wantArgv: []string{"./tool", "x=1", "a,b", "k:v"}, wantPath: "./tool"},
		{name: "a builtin (echo's escapes are the shell's)", command: "echo hi", wantShell: true},
		{name: "a builtin that changes the shell", command: "cd /tmp", wantShell: true},
		{name: "a reserved word", command: "time ls", wantShell: true},
		{name: "a glob", command: "ls *.go", wantShell: true},
		{name: "an expansion", command: "ls $HOME", wantShell: true},
		{name: "a tilde", command: "ls ~", wantShell: true},
		{name: "quotes", command: `ls "a b"`, wantShell: true},
		{name: "an escape", command: `ls a\ b`, wantShell: true},
		{name: "a redirection", command: "ls > out", wantShell: true},
		{name: "a sequence", command: "ls; ls", wantShell: true},
		{name: "a pipe", command: "ls | wc", wantShell: true},
		{name: "a comment", command: "ls # all", wantShell: true},
		{name: "a newline", command: "ls\nls", wantShell: true},
		{name: "an assignment before the program", command: "LC_ALL=C ls", wantShell: true},
		{name: "a program that is not there: the shell's 127 and message", command: "no-such-program x", wantShell: true},
		{name: "a file that is not executable: the shell's 126 and message", command: "./data.txt", wantShell: true},
		{name: "ENV names a file a shell reads first", command: "ls", env: map[string]string{"ENV": "/etc/shrc"}, wantShell: true},
		{name: "BASH_ENV names a file bash reads first", command: "ls", env: map[string]string{"BASH_ENV": "/etc/bashrc"}, wantShell: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := buildSpec(t, r, &wire.ExecRequest{Command: tt.command, Env: tt.env})
			want := tt.wantArgv
			if tt.wantShell {
				want = shell(tt.command)
			}
			if !slices.Equal(sp.Argv, want) {
				t.Errorf("argv %q, want %q", sp.Argv, want)
			}
			if tt.wantPath != "" && sp.Path != tt.wantPath {
				t.Errorf("path %q, want %q", sp.Path, tt.wantPath)
			}
		})
	}
	always := newRunner(t, func(c *process.Config) { c.AlwaysShell = true })
	if sp := buildSpec(t, always, &wire.ExecRequest{Command: "ls -l"}); !slices.Equal(sp.Argv, shell("ls -l")) {
		t.Errorf("with AlwaysShell: argv %q, want the shell's", sp.Argv)
	}
}

// Exec'd directly or through the shell, a command prints the same and ends the same.
func TestADirectCommandRunsAsTheShellWouldRunIt(t *testing.T) {
	direct, root := newRunnerWithRoot(t)
	viaShell, shellRoot := newRunnerWithRoot(t, func(c *process.Config) { c.AlwaysShell = true })
	for _, dir := range []string{root, shellRoot} {
		if err := os.WriteFile(filepath.Join(dir, "exit3"), []byte("#!/bin/sh\necho \"$0 $#: $*\"\nexit 3\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, command := range []string{"ls -a /", "./exit3 a b=c d,e", "/bin/sh -c false", "ls /no-such-dir", "id -u"} {
		t.Run(command, func(t *testing.T) {
			req := &wire.ExecRequest{Command: command, Cwd: "/"}
			got, _ := direct.Collect(context.Background(), buildSpec(t, direct, req), "buffered")
			want, _ := viaShell.Collect(context.Background(), buildSpec(t, viaShell, req), "buffered")
			if got.Stdout != want.Stdout || got.Stderr != want.Stderr || got.ExitCode != want.ExitCode {
				t.Errorf("direct: %q, %q, exit %d; through the shell: %q, %q, exit %d",
					got.Stdout, got.Stderr, got.ExitCode, want.Stdout, want.Stderr, want.ExitCode)
			}
		})
	}
}

// BenchmarkCommandString is a small command's whole run (start, output, exit) exec'd directly
// and through the shell. Run it under gVisor as well, where an exec costs the most:
// go test -c -o /tmp/process.test ./internal/sandboxd/process &&
// runsc --network=none do /tmp/process.test -test.run '^$' -test.bench CommandString
func BenchmarkCommandString(b *testing.B) {
	for _, mode := range []struct {
		name   string
		always bool
	}{{"direct", false}, {"shell", true}} {
		b.Run(mode.name, func(b *testing.B) {
			r := newRunner(b, func(c *process.Config) { c.AlwaysShell = mode.always })
			req := &wire.ExecRequest{Command: "ls /"}
			for b.Loop() {
				sp, err := r.BuildSpec(context.Background(), req, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if out, _ := r.Collect(context.Background(), sp, "buffered"); out.ExitCode != 0 {
					b.Fatalf("exit %d: %s", out.ExitCode, out.Stderr)
				}
			}
		})
	}
}
