// Command sandboxd is the runtime daemon inside a sandbox pod. It serves the
// command, file and watch API plus the legacy python-runtime API on one
// port (HTTP/1.1 and h2c). See docs/sandboxd-api.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd:", err)
		os.Exit(2)
	}
	slog.SetDefault(cfg.Logger)
	// Commands must not inherit the token.
	_ = os.Unsetenv("SANDBOXD_TOKEN")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, cfg))
}

// run serves until ctx ends and returns the exit code; deferred work (the last spans' flush)
// runs before the exit.
func run(ctx context.Context, cfg sandboxd.Config) int {
	tp, flushTraces, err := tracing.Setup(ctx, "sandboxd", func(err error) { cfg.Logger.Warn("tracing", "error", err) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd:", err)
		return 2
	}
	defer flushTraces()
	cfg.TracerProvider = tp
	if err := sandboxd.Run(ctx, cfg); err != nil {
		cfg.Logger.Error("sandboxd failed", "error", err)
		return 1
	}
	return 0
}

// parseConfig reads flags, falling back to SANDBOXD_* environment variables
// (and the python runtime's variables) for anything not given on the command line.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (sandboxd.Config, error) {
	env := func(keys ...string) string {
		for _, k := range keys {
			if v := getenv(k); v != "" {
				return v
			}
		}
		return ""
	}
	fset := flag.NewFlagSet("sandboxd", flag.ContinueOnError)
	fset.SetOutput(out)
	fset.Usage = func() {
		fmt.Fprintf(out, "Usage: sandboxd [flags]\n\nThe runtime daemon of an agent sandbox. Every flag also reads SANDBOXD_<NAME> from the environment.\n\nFlags:\n")
		fset.PrintDefaults()
	}
	listen := fset.String("listen", or(env("SANDBOXD_LISTEN"), ":8888"), "address to serve HTTP/1.1 and h2c on (SANDBOXD_LISTEN)")
	grpcListen := fset.String("grpc-listen", or(env("SANDBOXD_GRPC_LISTEN"), ":9090"), "address to serve the gRPC ProcessService on (upstream sandboxd's port; it is also served on --listen); off disables (SANDBOXD_GRPC_LISTEN)")
	restListen := fset.String("rest-listen", env("SANDBOXD_REST_LISTEN"), "extra address serving the HTTP API, e.g. :8080 (upstream sandboxd's REST port, the default of upstream SDKs in sandboxd mode); empty: none (SANDBOXD_REST_LISTEN)")
	envdListen := fset.String("envd-listen", or(env("SANDBOXD_ENVD_LISTEN"), ":49983"), "address to serve E2B's in-sandbox API (envd) on, E2B's SDKs' port; off disables (SANDBOXD_ENVD_LISTEN)")
	root := fset.String("root", or(env("SANDBOXD_ROOT", "SANDBOX_BASE_DIR"), "/workspace"), "sandbox root for files and working directories; created if missing (SANDBOXD_ROOT)")
	token := fset.String("token", "", "bearer token required on every endpoint but /healthz and GET /; prefer SANDBOXD_TOKEN or --token-file")
	tokenFile := fset.String("token-file", env("SANDBOXD_TOKEN_FILE"), "file holding the bearer token (SANDBOXD_TOKEN_FILE)")
	execTimeout := fset.String("exec-timeout", or(env("SANDBOXD_EXEC_TIMEOUT"), legacySeconds(env("SANDBOX_EXEC_TIMEOUT_SECONDS")), "300s"), "default command timeout (SANDBOXD_EXEC_TIMEOUT)")
	maxOutput := fset.Int64("max-output", sandboxd.DefaultMaxOutput, "cap in bytes per output stream of a buffered command; output over it is reported, never cut silently (SANDBOXD_MAX_OUTPUT)")
	alwaysShell := fset.Bool("always-shell", env("SANDBOXD_ALWAYS_SHELL") == "true", "run every command string through /bin/sh -c, even one the shell would only exec (by default those are exec'd directly: the same process, without loading a shell first) (SANDBOXD_ALWAYS_SHELL=true)")
	shutdownTimeout := fset.String("shutdown-timeout", or(env("SANDBOXD_SHUTDOWN_TIMEOUT"), "10s"), "grace period for requests and commands on SIGTERM (SANDBOXD_SHUTDOWN_TIMEOUT)")
	logOpts, err := loggingOptions(fset, env)
	if err != nil {
		return sandboxd.Config{}, err
	}
	if v := env("SANDBOXD_MAX_OUTPUT"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return sandboxd.Config{}, fmt.Errorf("SANDBOXD_MAX_OUTPUT: %w", err)
		}
		*maxOutput = n
	}
	if err := fset.Parse(args); err != nil {
		return sandboxd.Config{}, err
	}
	if fset.NArg() > 0 {
		return sandboxd.Config{}, fmt.Errorf("unexpected arguments: %v", fset.Args())
	}

	cfg := sandboxd.Config{Listen: *listen, GRPCListen: *grpcListen, RESTListen: *restListen, EnvdListen: *envdListen, Root: *root, MaxOutput: *maxOutput, Version: version, AlwaysShell: *alwaysShell}
	if cfg.ExecTimeout, err = positiveDuration("exec-timeout", *execTimeout); err != nil {
		return cfg, err
	}
	if cfg.ShutdownTimeout, err = positiveDuration("shutdown-timeout", *shutdownTimeout); err != nil {
		return cfg, err
	}
	if cfg.MaxOutput <= 0 {
		return cfg, errors.New("max-output must be positive")
	}
	cfg.Token = or(*token, env("SANDBOXD_TOKEN"))
	if cfg.Token == "" && *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return cfg, fmt.Errorf("token-file: %w", err)
		}
		cfg.Token = strings.TrimSpace(string(b))
	}
	cfg.Logger = slog.New(logOpts.Handler(os.Stderr))
	return cfg, nil
}

// loggingOptions binds the shared logging flags, with their SANDBOXD_* variables as defaults:
// SANDBOXD_V and SANDBOXD_LOGGING_FORMAT, and the older SANDBOXD_LOG_LEVEL and
// SANDBOXD_LOG_FORMAT.
func loggingOptions(fset *flag.FlagSet, env func(...string) string) (*logging.Options, error) {
	o := logging.NewOptions(logging.FormatJSON)
	o.BindFlags(fset)
	for _, name := range []string{"log-level", "v", "log-format", "logging-format"} {
		key := "SANDBOXD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if v := env(key); v != "" {
			if err := fset.Set(name, v); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	return o, nil
}

func or(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// legacySeconds converts the python runtime's SANDBOX_EXEC_TIMEOUT_SECONDS.
func legacySeconds(v string) string {
	if v == "" {
		return ""
	}
	return v + "s"
}

func positiveDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s must be positive", name)
	}
	return d, nil
}
