// Package sandboxd is the runtime daemon that runs inside a sandbox pod: it
// runs commands (buffered, streamed as NDJSON, interactive over WebSocket,
// or in the background), moves files under one root directory, watches it,
// and serves the legacy python-runtime API and upstream sandboxd's runtime
// API (/v1/files and the gRPC ProcessService), all on one HTTP port that
// speaks HTTP/1.1 and h2c (gRPC also on a port of its own).
//
// This package wires the Server together: configuration, listeners and
// graceful shutdown, routing, authentication, health, metadata and metrics.
// The endpoints live in subpackages, each depending only on those below it:
//
//	execapi   /v1/exec, /v1/exec/ws, /v1/processes, gRPC ProcessService
//	files     /v1/files, /v1/stat, /v1/list, /v1/mkdir, /v1/watch
//	legacy    the python runtime's API (/execute, /upload, /download, ...)
//	process   running commands: specs, pipes or a PTY, signals, timeouts
//	respond   JSON and NDJSON answers, errors mapped to statuses
//	rootfs    the root directory: path resolution that refuses escapes
//	wire      the JSON types of the HTTP API
package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/envd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/execapi"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/files"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/legacy"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Listen is the address Run listens on (default ":8888"). It serves the
	// HTTP API and, for HTTP/2 requests of type application/grpc, the gRPC
	// ProcessService too.
	Listen string
	// GRPCListen is a second address Run listens on for gRPC alone (default
	// ":9090", upstream sandboxd's gRPC port); "off" disables it.
	GRPCListen string
	// RESTListen is an optional extra address Run serves the HTTP API on,
	// such as ":8080", upstream sandboxd's REST port, for upstream SDKs in
	// sandboxd mode with their default ports (default "": none).
	RESTListen string
	// EnvdListen is the address Run serves E2B's in-sandbox API (envd) on
	// (default ":49983", envd's port, which E2B's SDKs address); "off"
	// disables it. It takes Token as X-Access-Token (docs/e2b-envd.md).
	EnvdListen string
	// EnvdMaxUploadBytes bounds one upload to envd's /files (0: no bound).
	EnvdMaxUploadBytes int64
	// Root is the directory all file paths and working directories live in
	// (default "/workspace"); it is created if missing.
	Root string
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every endpoint except /healthz and GET /.
	Token string
	// ExecTimeout is the default timeout of buffered and streamed commands
	// and of the legacy /execute (default 300s).
	ExecTimeout time.Duration
	// MaxOutput caps each output stream of a buffered command (default
	// DefaultMaxOutput). Output over it is never dropped silently: /v1/exec
	// sets truncated flags, the legacy /execute and gRPC Execute answer with
	// a non-zero exit code and a stderr line.
	MaxOutput int64
	// ShutdownTimeout is how long Run waits for requests and foreground
	// commands before killing them (default 10s).
	ShutdownTimeout time.Duration
	// ProcessLogBytes is the ring buffer size per stream of a background
	// process (default 1 MiB).
	ProcessLogBytes int
	// KillGrace is the time between SIGTERM and SIGKILL when a process
	// group is killed (default 2s).
	KillGrace time.Duration
	// Shell runs "command" strings as Shell -c (default "/bin/sh").
	Shell string
	// AlwaysShell runs every command string through Shell, even one the shell would only exec
	// (process.Config.AlwaysShell).
	AlwaysShell bool
	// Version is reported by /metadata.
	Version string
	// MetadataEnvPrefix selects the environment variables GET /v1/metadata
	// reports (default "SANDBOX_"), as upstream sandboxd's
	// --metadata-env-prefix.
	MetadataEnvPrefix string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// TracerProvider makes a span per request and gRPC call (tracing.go); nil or the no-op
	// provider: none.
	TracerProvider trace.TracerProvider
}

// DefaultMaxOutput is the default cap per output stream of a buffered
// command: generous, so that a client sees everything a command prints.
const DefaultMaxOutput = 64 << 20

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = ":8888"
	}
	if c.Root == "" {
		c.Root = "/workspace"
	}
	if c.GRPCListen == "" {
		c.GRPCListen = ":9090"
	}
	if c.EnvdListen == "" {
		c.EnvdListen = fmt.Sprintf(":%d", envd.DefaultPort)
	}
	if c.ExecTimeout <= 0 {
		c.ExecTimeout = 300 * time.Second
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = DefaultMaxOutput
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.ProcessLogBytes <= 0 {
		c.ProcessLogBytes = 1 << 20
	}
	if c.KillGrace <= 0 {
		c.KillGrace = 2 * time.Second
	}
	if c.Shell == "" {
		c.Shell = "/bin/sh"
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.MetadataEnvPrefix == "" {
		c.MetadataEnvPrefix = "SANDBOX_"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Server is the sandboxd HTTP handler. Create it with New and release it
// with Close.
type Server struct {
	cfg       Config
	log       *slog.Logger
	fs        *rootfs.FS // every file operation goes through it
	startTime time.Time
	hostname  string
	metrics   *metrics
	runner    *process.Runner
	files     *files.Handler
	exec      *execapi.Handler
	legacy    *legacy.Handler
	envd      *envd.Service
	routes    []route
	grpc      *grpc.Server // the ProcessService, on Listen and on GRPCListen
	tracer    trace.Tracer // nil: tracing off
	activity  *activity
	warming   atomic.Bool  // the warm-up runs: its command is not counted
	grpcLn    net.Listener // GRPCListen's listener; nil when off or not run by Run
	restLn    net.Listener // RESTListen's listener; nil when unset or not run by Run
	envdLn    net.Listener // EnvdListen's listener; nil when off or not run by Run

	mu       sync.Mutex
	draining bool // shutting down: no new commands
	closed   bool
}

// New validates cfg, creates the root directory if needed, and returns a
// Server ready to serve.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	root, err := rootfs.Open(cfg.Root)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		fs:        root,
		startTime: time.Now().UTC(),
		hostname:  host,
		activity:  newActivity(time.Now),
		tracer:    tracing.Tracer(cfg.TracerProvider, "sandboxd"),
	}
	s.cfg.Root = root.Dir()
	s.runner = process.NewRunner(root.Resolver(), process.Config{
		Shell: cfg.Shell, AlwaysShell: cfg.AlwaysShell, MaxOutput: cfg.MaxOutput, KillGrace: cfg.KillGrace,
		Observe: func(mode string, res process.Result) {
			if !s.warming.Load() {
				s.metrics.observeExec(mode, res)
			}
		},
	})
	s.files = files.New(root, s.log)
	s.exec = execapi.New(s.runner, execapi.Config{ExecTimeout: cfg.ExecTimeout, ProcessLogBytes: cfg.ProcessLogBytes, Logger: s.log})
	s.legacy = legacy.New(root, s.runner, cfg.ExecTimeout)
	s.envd = envd.New(envd.Config{FS: root, Runner: s.runner, Shell: cfg.Shell, Token: cfg.Token, MaxUploadBytes: cfg.EnvdMaxUploadBytes, Logger: s.log.With("api", "envd")})
	s.metrics = newMetrics(s.runningProcesses)
	s.routes = s.buildRoutes()
	s.grpc = s.newGRPCServer()
	return s, nil
}

// Close kills every running command (foreground and background), waits for
// them to be reaped and releases the root. The handler must not be used
// afterwards.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.runner.Stop()
	s.grpc.Stop() // ends every gRPC call; their commands die with their contexts
	s.runner.KillAll()
	s.exec.Close()
	s.envd.Close()
	s.runner.Wait()
	return s.fs.Close()
}

// Serve serves on ln until ctx is done, then shuts down gracefully: it stops
// accepting, waits up to ShutdownTimeout for requests and commands, then
// kills what is left. It closes the Server before returning.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	hs := &http.Server{
		Handler:           s,
		Protocols:         &protos,
		ReadHeaderTimeout: 15 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.log.Info("sandboxd listening", "addr", ln.Addr().String(), "root", s.fs.Dir(), "auth", s.cfg.Token != "")
	s.serveExtraPorts(hs)
	envdSrv := s.serveEnvd(hs)

	select {
	case err := <-errc:
		_ = s.Close()
		return err
	case <-ctx.Done():
	}
	s.shutdown(hs, cancelBase)
	s.stopEnvd(envdSrv)
	cancelBase()
	<-errc //nolint:errcheck // http.ErrServerClosed: Shutdown ended it
	err := s.Close()
	s.log.Info("sandboxd stopped")
	return err
}

// serveExtraPorts serves the HTTP API on RESTListen and the ProcessService
// on GRPCListen, when Run opened them.
func (s *Server) serveExtraPorts(hs *http.Server) {
	if s.restLn != nil {
		go func() {
			if err := hs.Serve(s.restLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("REST listener stopped", "error", err)
			}
		}()
		s.log.Info("sandboxd listening", "addr", s.restLn.Addr().String(), "for", "upstream REST port")
	}
	if s.grpcLn != nil {
		go func() {
			if err := s.ServeGRPC(s.grpcLn); err != nil {
				s.log.Error("gRPC server stopped", "error", err)
			}
		}()
		s.log.Info("sandboxd gRPC listening", "addr", s.grpcLn.Addr().String())
	}
}

// serveEnvd serves envd's API on EnvdListen, when Run opened it, with hs's
// protocols and limits.
func (s *Server) serveEnvd(hs *http.Server) *http.Server {
	if s.envdLn == nil {
		return nil
	}
	es := &http.Server{
		Handler: s.EnvdHandler(), Protocols: hs.Protocols, ReadHeaderTimeout: hs.ReadHeaderTimeout,
		IdleTimeout: hs.IdleTimeout, BaseContext: hs.BaseContext, ErrorLog: hs.ErrorLog,
	}
	go func() {
		if err := es.Serve(s.envdLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("envd listener stopped", "error", err)
		}
	}()
	s.log.Info("sandboxd listening", "addr", s.envdLn.Addr().String(), "for", "E2B envd API")
	return es
}

// stopEnvd ends envd's processes (their streams then end with their end
// events) and closes its listener after a short grace.
func (s *Server) stopEnvd(es *http.Server) {
	if es == nil {
		return
	}
	s.envd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.KillGrace+2*time.Second)
	defer cancel()
	if err := es.Shutdown(ctx); err != nil {
		_ = es.Close()
	}
}

// shutdown stops hs gracefully: it waits up to ShutdownTimeout for requests
// and foreground commands, then kills the commands, ends the streams (by
// cancelling the requests' base context) and waits KillGrace for their
// final frames.
func (s *Server) shutdown(hs *http.Server, cancelBase context.CancelFunc) {
	s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout.String())
	go s.grpc.GracefulStop() // Close stops what is still running
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	shutErr := hs.Shutdown(sctx)
	// Shutdown does not track hijacked (WebSocket) connections; wait for the
	// commands they run as well, within the same deadline. From here on a
	// new command is killed at once, which also keeps the runner's count
	// from growing under the Wait below.
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.runner.Stop()
	execDone := make(chan struct{})
	go func() { s.runner.Wait(); close(execDone) }()
	select {
	case <-execDone:
	case <-sctx.Done():
	}
	if shutErr == nil && sctx.Err() == nil {
		return
	}
	// Time is up: kill what still runs, end watch and follow streams, and
	// let the handlers write their final frames before closing.
	s.log.Warn("shutdown timeout: killing running commands")
	s.runner.KillAll()
	cancelBase()
	kctx, kcancel := context.WithTimeout(context.Background(), s.cfg.KillGrace+2*time.Second)
	defer kcancel()
	if err := hs.Shutdown(kctx); err != nil {
		_ = hs.Close() // forcibly, then; Serve returns either way
	}
	select {
	case <-execDone:
	case <-kctx.Done():
	}
}

// ServeGRPC serves the ProcessService alone on ln (as Run does on
// GRPCListen) until the Server is closed.
func (s *Server) ServeGRPC(ln net.Listener) error { return s.grpc.Serve(ln) }

// Run creates a Server from cfg, warms its command path up (warmUp), listens on
// cfg.Listen and serves until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	s.warmUp(ctx)
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		_ = s.Close()
		return err
	}
	if s.cfg.GRPCListen != "off" {
		if s.grpcLn, err = net.Listen("tcp", s.cfg.GRPCListen); err != nil {
			_ = ln.Close()
			_ = s.Close()
			return fmt.Errorf("gRPC listener: %w", err)
		}
	}
	if s.restLn, err = listenUnless(s.cfg.RESTListen, ""); err != nil {
		s.closeListeners(ln)
		return fmt.Errorf("REST listener: %w", err)
	}
	if s.envdLn, err = listenUnless(s.cfg.EnvdListen, "off"); err != nil {
		s.closeListeners(ln)
		return fmt.Errorf("envd listener: %w", err)
	}
	return s.Serve(ctx, ln)
}

// listenUnless listens on addr unless it is the value that turns it off.
func listenUnless(addr, off string) (net.Listener, error) {
	if addr == off {
		return nil, nil
	}
	return net.Listen("tcp", addr)
}

// closeListeners undoes a Run that could not open all its listeners.
func (s *Server) closeListeners(ln net.Listener) {
	for _, l := range []net.Listener{ln, s.grpcLn, s.restLn, s.envdLn} {
		if l != nil {
			_ = l.Close()
		}
	}
	_ = s.Close()
}
