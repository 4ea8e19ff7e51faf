package sandboxd

import (
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// The daemon's own endpoints: health, metadata and metrics.

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	respond.JSON(w, http.StatusOK, wire.Health{Status: "ok"})
}

// capabilities lets clients feature-detect instead of parsing versions.
var capabilities = []string{
	"exec", "exec.stream", "exec.ws", "pty", "processes",
	"files", "files.tar", "watch", "legacy", "h2c", "metrics", "grpc",
}

func (s *Server) handleMetadata(w http.ResponseWriter, _ *http.Request) {
	respond.JSON(w, http.StatusOK, wire.Metadata{
		Version:      s.cfg.Version,
		Hostname:     s.hostname,
		Root:         s.cfg.Root,
		PID:          os.Getpid(),
		StartTime:    s.startTime,
		Capabilities: capabilities,
	})
}

// handleV1Health serves GET /v1/health (upstream sandboxd's): 200 with the
// uptime, 503 once the server is draining.
func (s *Server) handleV1Health(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	draining := s.draining || s.closed
	s.mu.Unlock()
	if draining {
		respond.V1Error(w, http.StatusServiceUnavailable, "sandboxd is shutting down")
		return
	}
	respond.JSON(w, http.StatusOK, wire.V1Health{Status: "ok", UptimeSeconds: int64(time.Since(s.startTime).Seconds())})
}

// sensitiveEnvMarkers keep credential-looking variables out of /v1/metadata
// even when they carry the prefix.
var sensitiveEnvMarkers = []string{
	"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CRED", "KEY",
	"AUTH", "BEARER", "PRIVATE", "CERT",
}

// handleV1Metadata serves GET /v1/metadata: the daemon's environment
// variables that start with the metadata prefix (SANDBOX_ by default), minus
// anything that looks like a credential.
func (s *Server) handleV1Metadata(w http.ResponseWriter, r *http.Request) {
	env := map[string]string{}
	add := func(k, v string) {
		if strings.HasPrefix(k, s.cfg.MetadataEnvPrefix) && !isSensitiveEnvName(k) {
			env[k] = v
		}
	}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			add(k, v)
		}
	}
	// The session's variables are the sandbox's as much as the container's own are.
	for k, v := range process.SessionEnv(r.Context()) {
		add(k, v)
	}
	respond.JSON(w, http.StatusOK, wire.V1Metadata{Env: env})
}

func isSensitiveEnvName(name string) bool {
	up := strings.ToUpper(name)
	for _, m := range sensitiveEnvMarkers {
		if strings.Contains(up, m) {
			return true
		}
	}
	return false
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	s.metrics.handler.ServeHTTP(w, r)
}
