package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestParseConfig(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, listen, root, token string, execTimeout, shutdown time.Duration, maxOut int64)
		wantErr string
	}{
		{
			name: "defaults",
			check: func(t *testing.T, listen, root, token string, et, sd time.Duration, mo int64) {
				if listen != ":8888" || root != "/workspace" || token != "" || et != 300*time.Second || sd != 10*time.Second || mo != sandboxd.DefaultMaxOutput {
					t.Fatalf("%q %q %q %v %v %d", listen, root, token, et, sd, mo)
				}
			},
		},
		{
			name: "env fallbacks",
			env: map[string]string{
				"SANDBOXD_LISTEN": ":9999", "SANDBOXD_ROOT": "/r", "SANDBOXD_TOKEN": "tok",
				"SANDBOXD_EXEC_TIMEOUT": "5s", "SANDBOXD_SHUTDOWN_TIMEOUT": "1s", "SANDBOXD_MAX_OUTPUT": "77",
			},
			check: func(t *testing.T, listen, root, token string, et, sd time.Duration, mo int64) {
				if listen != ":9999" || root != "/r" || token != "tok" || et != 5*time.Second || sd != time.Second || mo != 77 {
					t.Fatalf("%q %q %q %v %v %d", listen, root, token, et, sd, mo)
				}
			},
		},
		{
			name: "python runtime variables",
			env:  map[string]string{"SANDBOX_EXEC_TIMEOUT_SECONDS": "42", "SANDBOX_BASE_DIR": "/app"},
			check: func(t *testing.T, listen, root, token string, et, sd time.Duration, mo int64) {
				if et != 42*time.Second || root != "/app" {
					t.Fatalf("%v %q", et, root)
				}
			},
		},
		{
			name: "flags beat env",
			args: []string{"--listen", "127.0.0.1:1", "--root=/x", "--token", "flag", "--exec-timeout", "2m", "--max-output", "5"},
			env:  map[string]string{"SANDBOXD_LISTEN": ":9999", "SANDBOXD_TOKEN": "env", "SANDBOXD_MAX_OUTPUT": "77"},
			check: func(t *testing.T, listen, root, token string, et, sd time.Duration, mo int64) {
				if listen != "127.0.0.1:1" || root != "/x" || token != "flag" || et != 2*time.Minute || mo != 5 {
					t.Fatalf("%q %q %q %v %d", listen, root, token, et, mo)
				}
			},
		},
		{
			name: "token file",
			args: []string{"--token-file", tokenFile},
			check: func(t *testing.T, listen, root, token string, et, sd time.Duration, mo int64) {
				if token != "from-file" {
					t.Fatalf("token %q", token)
				}
			},
		},
		{name: "bad duration", args: []string{"--exec-timeout", "soon"}, wantErr: "exec-timeout"},
		{name: "zero duration", args: []string{"--shutdown-timeout", "0s"}, wantErr: "shutdown-timeout must be positive"},
		{name: "bad max output env", env: map[string]string{"SANDBOXD_MAX_OUTPUT": "lots"}, wantErr: "SANDBOXD_MAX_OUTPUT"},
		{name: "bad log level", args: []string{"--log-level", "loud"}, wantErr: "log-level"},
		{name: "stray argument", args: []string{"serve"}, wantErr: "unexpected arguments"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			cfg, err := parseConfig(tc.args, getenv, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Logger == nil {
				t.Fatal("no logger")
			}
			tc.check(t, cfg.Listen, cfg.Root, cfg.Token, cfg.ExecTimeout, cfg.ShutdownTimeout, cfg.MaxOutput)
		})
	}
}

func TestGRPCListen(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"default is upstream's gRPC port", nil, nil, ":9090"},
		{"flag", []string{"--grpc-listen", "127.0.0.1:9999"}, nil, "127.0.0.1:9999"},
		{"environment", nil, map[string]string{"SANDBOXD_GRPC_LISTEN": "off"}, "off"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if err != nil || cfg.GRPCListen != tc.want {
				t.Fatalf("GRPCListen %q, %v; want %q", cfg.GRPCListen, err, tc.want)
			}
		})
	}
}

func TestEnvdListen(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"default is envd's port, which E2B's SDKs address", nil, nil, ":49983"},
		{"flag", []string{"--envd-listen", "127.0.0.1:4998"}, nil, "127.0.0.1:4998"},
		{"environment turns it off", nil, map[string]string{"SANDBOXD_ENVD_LISTEN": "off"}, "off"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if err != nil || cfg.EnvdListen != tc.want {
				t.Fatalf("EnvdListen %q, %v; want %q", cfg.EnvdListen, err, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var out strings.Builder
	_, err := parseConfig([]string{"--help"}, func(string) string { return "" }, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err %v", err)
	}
	for _, f := range []string{"-listen", "-grpc-listen", "-root", "-token", "-exec-timeout", "-max-output", "-shutdown-timeout"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("help lacks %s", f)
		}
	}
}

func TestLoggingFlags(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		wantLevel slog.Level // the lowest level written
		wantErr   string
	}{
		{name: "info by default", wantLevel: slog.LevelInfo},
		{name: "-v", args: []string{"-v=2"}, wantLevel: -2},
		{name: "SANDBOXD_V", env: map[string]string{"SANDBOXD_V": "3"}, wantLevel: -3},
		{name: "SANDBOXD_LOG_LEVEL, the older name", env: map[string]string{"SANDBOXD_LOG_LEVEL": "debug"}, wantLevel: slog.LevelDebug},
		{name: "the flag beats the environment", args: []string{"--log-level=warn"}, env: map[string]string{"SANDBOXD_V": "3"}, wantLevel: slog.LevelWarn},
		{name: "a bad SANDBOXD_LOG_LEVEL", env: map[string]string{"SANDBOXD_LOG_LEVEL": "loud"}, wantErr: `SANDBOXD_LOG_LEVEL: want debug, info, warn, error or a number, not "loud"`},
		{name: "a bad SANDBOXD_LOGGING_FORMAT", env: map[string]string{"SANDBOXD_LOGGING_FORMAT": "xml"}, wantErr: `SANDBOXD_LOGGING_FORMAT: want json or text, not "xml"`},
		{name: "a bad --log-format", args: []string{"--log-format=xml"}, wantErr: `want json or text, not "xml"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.Logger.Enabled(context.Background(), tc.wantLevel) || cfg.Logger.Enabled(context.Background(), tc.wantLevel-1) {
				t.Fatalf("the logger does not write exactly level %v and above", tc.wantLevel)
			}
		})
	}
}
