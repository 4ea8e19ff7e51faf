// Package envd serves E2B's in-sandbox API (the daemon E2B calls envd) from
// sandboxd, so that E2B's SDKs run commands and move files in a sandbox
// unchanged: the process and filesystem services over the Connect protocol,
// and /files, /health, /init and /envs over plain HTTP. It runs commands
// with sandboxd's runner and reaches files through sandboxd's root, so the
// same path rules hold: the root is what clients see as "/", and no path
// leaves it. docs/e2b-envd.md lists what is served.
package envd

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/agent-sandbox/agent-sandbox/internal/e2b"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/filesystem/envdfilesystemconnect"
	"github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process/envdprocessconnect"
)

// Version is the envd version whose features this package serves (e2b.EnvdVersion, which
// the control plane reports).
const Version = e2b.EnvdVersion

// DefaultPort is envd's port, which E2B's SDKs address.
const DefaultPort = 49983

// maxMessageBytes bounds one Connect request message (stdin chunks are the
// largest); maxInitBytes bounds the body of /init.
const (
	maxMessageBytes = 16 << 20
	maxInitBytes    = 1 << 20
)

// Config configures a Service.
type Config struct {
	FS     *rootfs.FS
	Runner *process.Runner
	// Token, when set, is required as X-Access-Token (or "Authorization:
	// Bearer") on everything but /health; a /files request may instead
	// carry a signature made with it.
	Token string
	// Shell runs the commands the SDK sends to bash when the sandbox has no
	// bash (sandboxd's --shell, /bin/sh); "" turns that off.
	Shell string
	// MaxUploadBytes bounds one /files upload body (0: no bound but the
	// disk's, as sandboxd's other uploads).
	MaxUploadBytes int64
	Logger         *slog.Logger
	// Now is the clock signatures expire by (default time.Now).
	Now func() time.Time
}

// Service is envd's API over sandboxd's runner and root.
type Service struct {
	cfg     Config
	log     *slog.Logger
	procs   *procTable
	pollers *pollers
	handler http.Handler

	envMu sync.Mutex
	env   map[string]string // set by /init for every later command
}

// New builds the Service and its routes.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, log: cfg.Logger, procs: newProcTable(), pollers: &pollers{m: map[string]*poller{}}, env: map[string]string{}}
	opts := []connect.HandlerOption{
		connect.WithInterceptors(&authInterceptor{s: s}),
		connect.WithReadMaxBytes(maxMessageBytes),
	}
	mux := http.NewServeMux()
	mux.Handle(envdprocessconnect.NewProcessHandler(&processService{s: s}, opts...))
	mux.Handle(envdfilesystemconnect.NewFilesystemHandler(&filesystemService{s: s}, opts...))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.Handle("GET /files", s.requireFileAccess("read", http.HandlerFunc(s.download)))
	mux.Handle("POST /files", s.requireFileAccess("write", http.HandlerFunc(s.upload)))
	mux.Handle("POST /init", s.requireToken(http.HandlerFunc(s.init)))
	mux.Handle("GET /envs", s.requireToken(http.HandlerFunc(s.envs)))
	s.handler = mux
	return s
}

// ServeHTTP serves envd's API.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close kills the processes started through Start, waits for them and
// stops the polled watchers.
func (s *Service) Close() {
	s.procs.closeAll(s.cfg.Runner.KillGrace())
	s.pollers.closeAll()
}

// RunningProcesses counts the processes started through Start that still
// run, streamed to a client or not.
func (s *Service) RunningProcesses() int { return len(s.procs.list()) }

// hasToken checks the request's X-Access-Token or bearer token.
func (s *Service) hasToken(h http.Header) bool {
	if s.cfg.Token == "" {
		return true
	}
	if v := h.Get("X-Access-Token"); v != "" {
		return subtle.ConstantTimeCompare([]byte(v), []byte(s.cfg.Token)) == 1
	}
	a := h.Get("Authorization")
	const pfx = "Bearer "
	return len(a) > len(pfx) && strings.EqualFold(a[:len(pfx)], pfx) &&
		subtle.ConstantTimeCompare([]byte(a[len(pfx):]), []byte(s.cfg.Token)) == 1
}

func (s *Service) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hasToken(r.Header) {
			writeError(w, http.StatusUnauthorized, "unauthorized: send the sandbox's access token as X-Access-Token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireFileAccess accepts the token or a valid signature of the
// request's path, operation and user.
func (s *Service) requireFileAccess(op string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.hasToken(r.Header) {
			next.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		if q.Get("signature") == "" {
			writeError(w, http.StatusUnauthorized, "unauthorized: send X-Access-Token or a signature")
			return
		}
		if msg := s.checkSignature(q.Get("path"), op, q.Get("username"), q.Get("signature"), q.Get("signature_expiration")); msg != "" {
			writeError(w, http.StatusUnauthorized, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkSignature verifies envd's v1 file signature: the unpadded base64
// SHA-256 of "path:operation:user:token[:expiration]". It returns why the
// signature is refused, or "".
func (s *Service) checkSignature(p, op, user, sig, exp string) string {
	raw := p + ":" + op + ":" + user + ":" + s.cfg.Token
	if exp != "" {
		at, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return "invalid signature_expiration"
		}
		if s.cfg.Now().Unix() > at {
			return "the signature has expired"
		}
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	want := "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
	if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
		return "invalid signature"
	}
	return ""
}

// initRequest is the part of envd's /init body sandboxd acts on.
type initRequest struct {
	EnvVars     map[string]string `json:"envVars"`
	AccessToken *string           `json:"accessToken"`
}

// init serves POST /init: envVars join the environment of later commands.
// The access token is sandboxd's own; a different one is refused rather
// than adopted.
func (s *Service) init(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxInitBytes)
	var req initRequest
	if err := respond.DecodeJSON(r, &req); err != nil {
		fail(w, s.log, err)
		return
	}
	if req.AccessToken != nil && *req.AccessToken != s.cfg.Token {
		writeError(w, http.StatusConflict, "the access token is set by sandboxd's configuration and cannot be changed")
		return
	}
	for k := range req.EnvVars {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			writeError(w, http.StatusBadRequest, "invalid environment variable name "+strconv.Quote(k))
			return
		}
	}
	s.envMu.Lock()
	maps.Copy(s.env, req.EnvVars)
	s.envMu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// envs serves GET /envs: the variables /init set.
func (s *Service) envs(w http.ResponseWriter, _ *http.Request) {
	respond.JSON(w, http.StatusOK, s.initEnv())
}

func (s *Service) initEnv() map[string]string {
	s.envMu.Lock()
	defer s.envMu.Unlock()
	return maps.Clone(s.env)
}
