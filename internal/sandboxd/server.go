// Package sandboxd is the runtime daemon that runs inside a sandbox pod: it
// runs commands (buffered, streamed as NDJSON, interactive over WebSocket,
// or in the background), moves files under one root directory, watches it,
// and serves the legacy python-runtime API and upstream sandboxd's runtime
// API (/v1/files and the gRPC ProcessService), all on one HTTP port that
// speaks HTTP/1.1 and h2c (gRPC also on a port of its own).
package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/execapi"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/files"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/legacy"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"google.golang.org/grpc"
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
	// Version is reported by /metadata.
	Version string
	// MetadataEnvPrefix selects the environment variables GET /v1/metadata
	// reports (default "SANDBOX_"), as upstream sandboxd's
	// --metadata-env-prefix.
	MetadataEnvPrefix string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
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
	routes    []route
	grpc      *grpc.Server // the ProcessService, on Listen and on GRPCListen
	grpcLn    net.Listener // GRPCListen's listener; nil when off or not run by Run
	restLn    net.Listener // RESTListen's listener; nil when unset or not run by Run

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
	}
	s.cfg.Root = root.Dir()
	s.runner = process.NewRunner(root.Resolver(), process.Config{
		Shell: cfg.Shell, MaxOutput: cfg.MaxOutput, KillGrace: cfg.KillGrace,
		Observe: func(mode string, res process.Result) { s.metrics.observeExec(mode, res) },
	})
	s.files = files.New(root, s.log)
	s.exec = execapi.New(s.runner, execapi.Config{ExecTimeout: cfg.ExecTimeout, ProcessLogBytes: cfg.ProcessLogBytes, Logger: s.log})
	s.legacy = legacy.New(root, s.runner, cfg.ExecTimeout)
	s.metrics = newMetrics(s.exec.RunningProcesses)
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

	select {
	case err := <-errc:
		_ = s.Close()
		return err
	case <-ctx.Done():
	}
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
	if shutErr != nil || sctx.Err() != nil {
		// Time is up: kill what still runs, end watch and follow streams,
		// and let the handlers write their final frames before closing.
		s.log.Warn("shutdown timeout: killing running commands")
		s.runner.KillAll()
		cancelBase()
		kctx, kcancel := context.WithTimeout(context.Background(), s.cfg.KillGrace+2*time.Second)
		defer kcancel()
		if err := hs.Shutdown(kctx); err != nil {
			_ = hs.Close()
		}
		select {
		case <-execDone:
		case <-kctx.Done():
		}
	}
	cancelBase()
	<-errc
	err := s.Close()
	s.log.Info("sandboxd stopped")
	return err
}

// ServeGRPC serves the ProcessService alone on ln (as Run does on
// GRPCListen) until the Server is closed.
func (s *Server) ServeGRPC(ln net.Listener) error { return s.grpc.Serve(ln) }

// Run creates a Server from cfg, listens on cfg.Listen and serves until ctx
// is done.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
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
	if s.cfg.RESTListen != "" {
		if s.restLn, err = net.Listen("tcp", s.cfg.RESTListen); err != nil {
			_ = ln.Close()
			if s.grpcLn != nil {
				_ = s.grpcLn.Close()
			}
			_ = s.Close()
			return fmt.Errorf("REST listener: %w", err)
		}
	}
	return s.Serve(ctx, ln)
}

// ---- routing ----

// route is one endpoint. With prefix set, the pattern is a prefix and the
// rest of the (decoded, uncleaned) URL path is the file path argument. We do
// our own routing because http.ServeMux cleans paths and redirects "..",
// which would turn an escape attempt into a redirect instead of a 403.
type route struct {
	method  string
	pattern string // exact path, or prefix ending in "/" when prefix is set
	prefix  bool
	name    string // metrics label
	public  bool   // no token needed
	h       func(w http.ResponseWriter, r *http.Request, arg string)
}

func (s *Server) buildRoutes() []route {
	exact := func(method, p string, h http.HandlerFunc) route {
		return route{method: method, pattern: p, name: p, h: func(w http.ResponseWriter, r *http.Request, _ string) { h(w, r) }}
	}
	file := func(method, p string, h func(http.ResponseWriter, *http.Request, string)) route {
		return route{method: method, pattern: p, prefix: true, name: p + "{path}", h: h}
	}
	rs := []route{
		exact("GET", "/", s.legacy.Root),
		exact("GET", "/healthz", s.handleHealth),
		exact("GET", "/metadata", s.handleMetadata),
		exact("GET", "/metrics", s.handleMetrics),
		exact("GET", "/v1/health", s.handleV1Health),
		exact("GET", "/v1/metadata", s.handleV1Metadata),
		exact("POST", "/v1/exec", s.exec.Exec),
		exact("GET", "/v1/exec/ws", s.exec.ExecWS),
		exact("POST", "/v1/processes", s.exec.StartProcess),
		exact("GET", "/v1/processes", s.exec.ListProcesses),
		{method: "GET", pattern: "/v1/processes/", prefix: true, name: "/v1/processes/{id}", h: s.exec.GetProcess},
		{method: "POST", pattern: "/v1/processes/", prefix: true, name: "/v1/processes/{id}/signal", h: s.exec.PostProcess},
		{method: "DELETE", pattern: "/v1/processes/", prefix: true, name: "/v1/processes/{id}", h: s.exec.DeleteProcess},
		file("GET", "/v1/files/", s.files.GetFile),
		file("PUT", "/v1/files/", s.files.PutFile),
		file("DELETE", "/v1/files/", s.files.DeleteFile),
		file("POST", "/v1/mkdir/", s.files.Mkdir),
		file("GET", "/v1/stat/", s.files.Stat),
		file("GET", "/v1/list/", s.files.List),
		file("GET", "/v1/watch/", s.files.Watch),
		exact("POST", "/execute", s.legacy.Execute),
		exact("POST", "/upload", s.legacy.Upload),
		file("GET", "/download/", s.legacy.Download),
		file("GET", "/list/", s.legacy.List),
		file("GET", "/exists/", s.legacy.Exists),
	}
	for i := range rs {
		if rs[i].pattern == "/" || rs[i].pattern == "/healthz" || rs[i].pattern == "/v1/health" {
			rs[i].public = true
		}
	}
	return rs
}

// match finds the route for r. It returns the route, the path argument, and
// the methods allowed on the path when only the method did not match.
func (s *Server) match(r *http.Request) (*route, string, []string) {
	p := r.URL.Path
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	var allowed []string
	for i := range s.routes {
		rt := &s.routes[i]
		arg, ok := "", false
		switch {
		case !rt.prefix:
			ok = p == rt.pattern
		case strings.HasPrefix(p, rt.pattern):
			arg, ok = p[len(rt.pattern):], true
		case p == strings.TrimSuffix(rt.pattern, "/"): // "/v1/list" lists the root
			ok = true
		}
		if !ok {
			continue
		}
		if rt.method == method {
			return rt, arg, nil
		}
		allowed = append(allowed, rt.method)
	}
	return nil, "", allowed
}

// ServeHTTP routes, authenticates, instruments and logs one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isGRPC(r.ProtoMajor, r.Header.Get("Content-Type")) {
		s.grpc.ServeHTTP(w, r) // the ProcessService, on the HTTP port too (reachable through the router)
		return
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	rt, arg, allowed := s.match(r)
	name := "unmatched"
	if rt != nil {
		name = rt.name
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("handler panic", "route", name, "panic", fmt.Sprint(v))
			if !sw.wrote {
				respond.Error(sw, http.StatusInternalServerError, "internal error")
			}
		}
		code := sw.status
		if code == 0 {
			code = http.StatusOK
		}
		d := time.Since(start)
		s.metrics.observeRequest(name, r.Method, code, d)
		s.log.Debug("request", "method", r.Method, "route", name, "status", code, "duration", d)
	}()

	switch {
	case rt == nil && len(allowed) > 0:
		slices.Sort(allowed)
		sw.Header().Set("Allow", strings.Join(slices.Compact(allowed), ", "))
		respond.Error(sw, http.StatusMethodNotAllowed, "method not allowed")
	case rt == nil:
		respond.Error(sw, http.StatusNotFound, "not found")
	case !rt.public && !s.authorized(r):
		sw.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd"`)
		respond.Error(sw, http.StatusUnauthorized, "unauthorized")
	default:
		rt.h(sw, r, arg)
	}
}

// statusWriter records the status code. Unwrap keeps http.ResponseController
// and the WebSocket hijack working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote || code == http.StatusSwitchingProtocols {
		w.status = code
	}
	if code >= 200 {
		w.wrote = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush lets code that type-asserts http.Flusher keep working.
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }
