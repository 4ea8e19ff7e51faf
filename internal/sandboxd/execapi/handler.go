// Package execapi serves the APIs that run commands through a
// process.Runner: POST /v1/exec (buffered or streamed as NDJSON),
// /v1/exec/ws (interactive, over a WebSocket), /v1/processes (background
// processes with retained logs), and upstream's gRPC ProcessService.
package execapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
)

// Config configures a Handler.
type Config struct {
	// ExecTimeout is the default timeout of /v1/exec.
	ExecTimeout time.Duration
	// ProcessLogBytes is the ring buffer size per stream of a background
	// process.
	ProcessLogBytes int
	// Logger receives structured logs.
	Logger *slog.Logger
}

// Handler serves the HTTP exec and process endpoints. Release it with Close.
type Handler struct {
	runner      *process.Runner
	procs       *processTable
	log         *slog.Logger
	execTimeout time.Duration
}

// New returns a Handler that runs commands through runner.
func New(runner *process.Runner, cfg Config) *Handler {
	return &Handler{
		runner:      runner,
		procs:       newProcessTable(runner, cfg.ProcessLogBytes),
		log:         cfg.Logger,
		execTimeout: cfg.ExecTimeout,
	}
}

// RunningProcesses counts the background processes still running.
func (h *Handler) RunningProcesses() int { return h.procs.runningCount() }

// Close kills every running background process and waits for them; new
// ones are refused.
func (h *Handler) Close() { h.procs.closeAll() }

// logOf is the request's logger (sandboxd's ServeHTTP puts one naming the request in its
// context), else the handler's.
func (h *Handler) logOf(r *http.Request) *slog.Logger {
	return logging.FromContext(r.Context(), h.log)
}
