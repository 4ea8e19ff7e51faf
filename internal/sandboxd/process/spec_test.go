package process_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Requests BuildSpec refuses, each with a 400 that says why.
func TestBuildSpecRefusesInvalidRequests(t *testing.T) {
	tests := []struct {
		name    string
		req     wire.ExecRequest
		wantMsg string
	}{
		{"nothing to run", wire.ExecRequest{}, "argv or command is required"},
		{"argv and command", wire.ExecRequest{Argv: []string{"true"}, Command: "true"}, "either argv or command"},
		{"empty argv[0]", wire.ExecRequest{Argv: []string{""}}, "argv[0] is empty"},
		{"NUL in an argument", wire.ExecRequest{Argv: []string{"echo", "a\x00b"}}, "NUL"},
		{"NUL in the command", wire.ExecRequest{Command: "echo a\x00b"}, "NUL"},
		{"negative timeout", wire.ExecRequest{Command: "true", TimeoutSeconds: -1}, "timeoutSeconds"},
		{"negative output cap", wire.ExecRequest{Command: "true", MaxOutputBytes: -1}, "maxOutputBytes"},
		{"stdin twice", wire.ExecRequest{Command: "cat", Stdin: "a", StdinBase64: "YQ=="}, "either stdin or stdinBase64"},
		{"stdin not base64", wire.ExecRequest{Command: "cat", StdinBase64: "%%%"}, "stdinBase64"},
		{"env key with =", wire.ExecRequest{Command: "true", Env: map[string]string{"A=B": "c"}}, "invalid environment variable"},
		{"empty env key", wire.ExecRequest{Command: "true", Env: map[string]string{"": "c"}}, "invalid environment variable"},
		{"NUL in an env value", wire.ExecRequest{Command: "true", Env: map[string]string{"A": "b\x00"}}, "invalid environment variable"},
		{"cwd missing", wire.ExecRequest{Command: "true", Cwd: "no/such/dir"}, "cwd"},
		{"cwd a file", wire.ExecRequest{Command: "true", Cwd: "file"}, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, root := newRunnerWithRoot(t)
			if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := r.BuildSpec(context.Background(), &tt.req, time.Minute)
			var se *respond.StatusError
			if !errors.As(err, &se) || se.Status != http.StatusBadRequest || !strings.Contains(se.Msg, tt.wantMsg) {
				t.Fatalf("error %v, want a 400 that mentions %q", err, tt.wantMsg)
			}
		})
	}
}

// specCase is a valid request and what BuildSpec must make of it.
type specCase struct {
	name  string
	req   wire.ExecRequest
	check func(t *testing.T, sp *process.Spec)
}

func checkSpecs(t *testing.T, ctx context.Context, r *process.Runner, tests []specCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp, err := r.BuildSpec(ctx, &tt.req, time.Minute)
			if err != nil {
				t.Fatalf("BuildSpec: %v", err)
			}
			tt.check(t, sp)
		})
	}
}

// The command's environment layers the daemon's (without its token), the session's and the
// request's, later ones winning; a terminal gets a TERM unless one is set.
func TestBuildSpecEnvironment(t *testing.T) {
	t.Setenv("SANDBOXD_TOKEN", "secret")
	t.Setenv("LAYER", "daemon")
	t.Setenv("DAEMON_ONLY", "d")
	t.Setenv("TERM", "")
	if err := os.Unsetenv("TERM"); err != nil { // restored by t.Setenv's cleanup
		t.Fatal(err)
	}
	r := newRunner(t)
	ctx := process.WithSessionEnv(context.Background(), map[string]string{"LAYER": "session", "SESSION_ONLY": "s"})
	checkSpecs(t, ctx, r, []specCase{
		{"environment layers", wire.ExecRequest{Command: "true", Env: map[string]string{"REQUEST_ONLY": "r"}}, func(t *testing.T, sp *process.Spec) {
			wantEnv(t, sp.Env, map[string]string{"LAYER": "session", "DAEMON_ONLY": "d", "SESSION_ONLY": "s", "REQUEST_ONLY": "r", "SANDBOXD_TOKEN": ""})
		}},
		{"the request wins", wire.ExecRequest{Command: "true", Env: map[string]string{"LAYER": "request"}}, func(t *testing.T, sp *process.Spec) {
			wantEnv(t, sp.Env, map[string]string{"LAYER": "request"})
		}},
		{"a terminal gets a TERM", wire.ExecRequest{Command: "true", TTY: true}, func(t *testing.T, sp *process.Spec) {
			wantEnv(t, sp.Env, map[string]string{"TERM": "xterm-256color"})
		}},
		{"the request's TERM is kept", wire.ExecRequest{Command: "true", TTY: true, Env: map[string]string{"TERM": "dumb"}}, func(t *testing.T, sp *process.Spec) {
			wantEnv(t, sp.Env, map[string]string{"TERM": "dumb"})
		}},
	})
}

// A valid request: argv or the shell's -c, the working directory inside the root, argv[0] looked
// up in the request's PATH, the timeout and the output cap within the server's bounds.
func TestBuildSpec(t *testing.T) {
	r, root := newRunnerWithRoot(t)
	if err := os.MkdirAll(filepath.Join(root, "work", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "work", "bin", "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	checkSpecs(t, context.Background(), r, []specCase{
		{"command runs in the shell", wire.ExecRequest{Command: "echo hi"}, func(t *testing.T, sp *process.Spec) {
			if !slices.Equal(sp.Argv, []string{"/bin/sh", "-c", "echo hi"}) {
				t.Errorf("argv %q, want the shell's -c", sp.Argv)
			}
		}},
		{"cwd inside the root", wire.ExecRequest{Argv: []string{"true"}, Cwd: "/work"}, func(t *testing.T, sp *process.Spec) {
			if sp.Dir != filepath.Join(root, "work") || sp.Cwd != "work" {
				t.Errorf("dir %q, cwd %q; want %q, work", sp.Dir, sp.Cwd, filepath.Join(root, "work"))
			}
		}},
		{"argv[0] found in the request's PATH, relative to cwd", wire.ExecRequest{Argv: []string{"tool"}, Cwd: "work", Env: map[string]string{"PATH": "bin:/usr/bin"}}, func(t *testing.T, sp *process.Spec) {
			if sp.Path != filepath.Join(root, "work", "bin", "tool") {
				t.Errorf("path %q, want the tool under work/bin", sp.Path)
			}
		}},
		{"argv[0] not found", wire.ExecRequest{Argv: []string{"no-such-tool"}}, func(t *testing.T, sp *process.Spec) {
			if sp.Path != "" {
				t.Errorf("path %q, want none", sp.Path)
			}
		}},
		{"default timeout", wire.ExecRequest{Command: "true"}, func(t *testing.T, sp *process.Spec) {
			if sp.Timeout != time.Minute {
				t.Errorf("timeout %s, want the default 1m", sp.Timeout)
			}
		}},
		{"request timeout", wire.ExecRequest{Command: "true", TimeoutSeconds: 1.5}, func(t *testing.T, sp *process.Spec) {
			if sp.Timeout != 1500*time.Millisecond {
				t.Errorf("timeout %s, want 1.5s", sp.Timeout)
			}
		}},
		{"a positive timeout under a nanosecond still bounds the run", wire.ExecRequest{Command: "true", TimeoutSeconds: 1e-10}, func(t *testing.T, sp *process.Spec) {
			if sp.Timeout <= 0 {
				t.Errorf("timeout %s, want a positive one (0 or less means no limit)", sp.Timeout)
			}
		}},
		{"a timeout beyond the longest duration is the longest", wire.ExecRequest{Command: "true", TimeoutSeconds: 1e12}, func(t *testing.T, sp *process.Spec) {
			if sp.Timeout != math.MaxInt64 {
				t.Errorf("timeout %s, want the longest duration", sp.Timeout)
			}
		}},
		{"a lower output cap", wire.ExecRequest{Command: "true", MaxOutputBytes: 10}, func(t *testing.T, sp *process.Spec) {
			if sp.MaxOutput != 10 {
				t.Errorf("output cap %d, want 10", sp.MaxOutput)
			}
		}},
		{"a higher output cap is the server's", wire.ExecRequest{Command: "true", MaxOutputBytes: 1 << 30}, func(t *testing.T, sp *process.Spec) {
			if sp.MaxOutput != 1024 {
				t.Errorf("output cap %d, want the server's 1024", sp.MaxOutput)
			}
		}},
	})
}

// A command that cannot start is answered like a shell would: 127 when it is not found, 126
// when it cannot be executed, with the reason on stderr.
func TestStartFailures(t *testing.T) {
	r, root := newRunnerWithRoot(t)
	if err := os.WriteFile(filepath.Join(root, "not-executable"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		argv0    string
		wantCode int
		wantMsg  string
	}{
		{"not in PATH", "no-such-command", 127, "command not found"},
		{"a path that does not exist", "./missing", 127, "no such file"},
		{"not executable", "./not-executable", 126, "permission denied"},
		{"a directory", "/", 126, "permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, res := r.Collect(context.Background(), buildSpec(t, r, &wire.ExecRequest{Argv: []string{tt.argv0}}), "test")
			if res.StartErr == nil || res.ExitCode != tt.wantCode || !strings.Contains(out.Stderr, tt.wantMsg) {
				t.Fatalf("result %+v, stderr %q; want a start failure %d saying %q", res, out.Stderr, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

// wantEnv checks the value each key has last in env ("" : the key is absent).
func wantEnv(t *testing.T, env []string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q in the environment, want %q", k, got[k], v)
		}
	}
}
