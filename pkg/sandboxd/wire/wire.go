// Package wire is the stable wire contract of sandboxd's HTTP API: the JSON
// request and response bodies, the NDJSON and WebSocket frames, the content
// types, the error bodies, and the session-env header with its codec.
// sandboxd, the router and the Go SDK (pkg/sdk) all import it, so a client
// written against it speaks exactly what the daemon serves; the gRPC half of
// the contract is pkg/proto/process/v1. It depends on the standard library
// alone.
//
// It is public so that other clients can be built on it. Changes keep old
// clients working: fields and constants are added, never renamed, retyped or
// removed. docs/sandboxd-api.md is the prose reference.
package wire

import (
	"encoding/json"
	"time"
)

// Content types used by sandboxd.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeNDJSON = "application/x-ndjson"
	ContentTypeTar    = "application/x-tar"
	ContentTypeOctet  = "application/octet-stream"
)

// ExecRequest describes a command for POST /v1/exec, POST /v1/processes and
// the first message of GET /v1/exec/ws. Exactly one of Argv and Command is set.
type ExecRequest struct {
	// Argv is executed directly; Argv[0] is looked up in PATH (the request's
	// PATH when Env sets one).
	Argv []string `json:"argv,omitempty"`
	// Command is run through /bin/sh -c.
	Command string `json:"command,omitempty"`
	// Env is added to (and overrides) the daemon's environment.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is relative to the sandbox root (a leading "/" also means the root).
	Cwd string `json:"cwd,omitempty"`
	// TimeoutSeconds bounds the run; 0 means the server default (buffered and
	// NDJSON exec) or no limit (WebSocket sessions, background processes).
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// Stdin and StdinBase64 are mutually exclusive; stdin is closed after it.
	Stdin       string `json:"stdin,omitempty"`
	StdinBase64 string `json:"stdinBase64,omitempty"`
	// MaxOutputBytes caps each of stdout and stderr in buffered mode; it can
	// only lower the server's limit.
	MaxOutputBytes int64 `json:"maxOutputBytes,omitempty"`
	// TTY, Cols and Rows request a pseudo-terminal (WebSocket only).
	TTY  bool   `json:"tty,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
}

// ExecResult is the response of a buffered POST /v1/exec. When a stream
// went over the output cap (the server's --max-output, or the request's
// maxOutputBytes) only its first bytes are returned and Truncated is set,
// together with the per-stream flag: output is never cut silently.
type ExecResult struct {
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	ExitCode        int    `json:"exitCode"`
	TimedOut        bool   `json:"timedOut"`
	StdoutTruncated bool   `json:"stdoutTruncated"`
	StderrTruncated bool   `json:"stderrTruncated"`
	// Truncated is StdoutTruncated || StderrTruncated.
	Truncated  bool  `json:"truncated"`
	DurationMs int64 `json:"durationMs"`
}

// Frame types. Server to client: stdout, stderr, exit, error. Client to
// server (WebSocket only): stdin, stdin_eof, signal, resize.
const (
	FrameStdout   = "stdout"
	FrameStderr   = "stderr"
	FrameExit     = "exit"
	FrameError    = "error"
	FrameStdin    = "stdin"
	FrameStdinEOF = "stdin_eof"
	FrameSignal   = "signal"
	FrameResize   = "resize"
)

// Frame is one NDJSON line or one WebSocket text message. Data is raw bytes
// and travels as standard base64. Only the fields that belong to Type are
// written (see MarshalJSON), so an exit frame always carries exitCode and
// timedOut, even when they are zero.
type Frame struct {
	Type     string `json:"type"`
	Data     []byte `json:"data,omitempty"`
	ExitCode int    `json:"exitCode,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
	Error    string `json:"error,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Cols     uint16 `json:"cols,omitempty"`
	Rows     uint16 `json:"rows,omitempty"`
}

// MarshalJSON writes only the fields relevant to f.Type.
func (f Frame) MarshalJSON() ([]byte, error) {
	switch f.Type {
	case FrameStdout, FrameStderr, FrameStdin:
		return json.Marshal(struct {
			Type string `json:"type"`
			Data []byte `json:"data"`
		}{f.Type, f.Data})
	case FrameExit:
		return json.Marshal(struct {
			Type     string `json:"type"`
			ExitCode int    `json:"exitCode"`
			TimedOut bool   `json:"timedOut"`
		}{f.Type, f.ExitCode, f.TimedOut})
	case FrameError:
		return json.Marshal(struct {
			Type  string `json:"type"`
			Error string `json:"error"`
		}{f.Type, f.Error})
	case FrameSignal:
		return json.Marshal(struct {
			Type   string `json:"type"`
			Signal string `json:"signal"`
		}{f.Type, f.Signal})
	case FrameResize:
		return json.Marshal(struct {
			Type string `json:"type"`
			Cols uint16 `json:"cols"`
			Rows uint16 `json:"rows"`
		}{f.Type, f.Cols, f.Rows})
	default:
		type plain Frame // drop the method to avoid recursion
		return json.Marshal(plain(f))
	}
}

// Error is the body of every non-2xx response of the /v1 API.
type Error struct {
	Error string `json:"error"`
}

// Health is the body of GET /healthz.
type Health struct {
	Status string `json:"status"`
}

// Metadata is the body of GET /metadata.
type Metadata struct {
	Version      string    `json:"version"`
	Hostname     string    `json:"hostname"`
	Root         string    `json:"root"`
	PID          int       `json:"pid"`
	StartTime    time.Time `json:"startTime"`
	Capabilities []string  `json:"capabilities"`
}

// FileInfo describes one file system entry. Stat and list describe the entry
// itself: a symlink has IsSymlink set and LinkTarget filled, and is not
// followed.
type FileInfo struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"` // relative to the root, slash-separated, "." for the root
	Size       int64     `json:"size"`
	Mode       string    `json:"mode"` // permission bits in octal, e.g. "0644"
	ModTime    time.Time `json:"modTime"`
	IsDir      bool      `json:"isDir"`
	IsSymlink  bool      `json:"isSymlink"`
	LinkTarget string    `json:"linkTarget,omitempty"`
}

// ListResponse is the body of GET /v1/list/{path}.
type ListResponse struct {
	Entries []FileInfo `json:"entries"`
}

// WatchEvent is one NDJSON line of GET /v1/watch/{path}.
type WatchEvent struct {
	Op   string `json:"op"` // create, write, remove, rename, chmod, or overflow
	Path string `json:"path"`
}

// Watch operations.
const (
	OpCreate   = "create"
	OpWrite    = "write"
	OpRemove   = "remove"
	OpRename   = "rename"
	OpChmod    = "chmod"
	OpOverflow = "overflow" // the kernel dropped events; rescan if it matters
)

// StartProcessResponse is the body of POST /v1/processes.
type StartProcessResponse struct {
	ID  string `json:"id"`
	PID int    `json:"pid"`
}

// Process describes a background process.
type Process struct {
	ID        string     `json:"id"`
	PID       int        `json:"pid"`
	Argv      []string   `json:"argv,omitempty"`
	Command   string     `json:"command,omitempty"`
	Cwd       string     `json:"cwd"`
	StartedAt time.Time  `json:"startedAt"`
	Running   bool       `json:"running"`
	ExitCode  *int       `json:"exitCode"` // null while running
	ExitedAt  *time.Time `json:"exitedAt,omitempty"`
	TimedOut  bool       `json:"timedOut"`
}

// ProcessList is the body of GET /v1/processes.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// ProcessLogs is the body of GET /v1/processes/{id}/logs. The buffers keep
// the most recent output; the Truncated flags say older output was dropped.
type ProcessLogs struct {
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdoutTruncated"`
	StderrTruncated bool   `json:"stderrTruncated"`
}

// SignalRequest is the body of POST /v1/processes/{id}/signal.
type SignalRequest struct {
	Signal string `json:"signal"`
}

// Shapes of upstream sandboxd's filesystem API (/v1/files, /v1/health,
// /v1/metadata), field for field.

// APIError is the body of every non-2xx answer of /v1/files, /v1/health and
// /v1/metadata. Code is one of INVALID_ARGUMENT, UNAUTHENTICATED,
// PERMISSION_DENIED, NOT_FOUND, CONFLICT, UNAVAILABLE, INTERNAL.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// FileEntry is one entry of a DirectoryListing.
type FileEntry struct {
	Name       string `json:"name"`
	Size       int64  `json:"size"`
	Type       string `json:"type"`        // "file" or "directory"
	ModifiedAt string `json:"modified_at"` // RFC 3339, UTC, seconds
	Mode       string `json:"mode"`        // permission bits in octal, e.g. "0644"
}

// DirectoryListing is the body of GET /v1/files/{dir}.
type DirectoryListing struct {
	Path    string      `json:"path"` // the requested path with a leading "/"
	Entries []FileEntry `json:"entries"`
}

// V1Health is the body of GET /v1/health.
type V1Health struct {
	Status        string `json:"status"`
	UptimeSeconds int64  `json:"uptime_seconds"`
}

// V1Metadata is the body of GET /v1/metadata.
type V1Metadata struct {
	Env map[string]string `json:"env"`
}

// Legacy API shapes (the python runtime's wire format, kept byte for byte).

// LegacyExecuteRequest is the body of POST /execute.
type LegacyExecuteRequest struct {
	Command string `json:"command"`
}

// LegacyExecuteResponse is the response of POST /execute.
type LegacyExecuteResponse struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
}

// LegacyMessage is the body of legacy status and error responses.
type LegacyMessage struct {
	Message string `json:"message"`
}

// LegacyStatus is the body of GET /.
type LegacyStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// LegacyListEntry is one element of GET /list/{path}.
type LegacyListEntry struct {
	Name    string  `json:"name"`
	Size    int64   `json:"size"`
	Type    string  `json:"type"` // "file" or "directory"
	ModTime float64 `json:"mod_time"`
}

// LegacyExists is the body of GET /exists/{path}.
type LegacyExists struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
}

// Activity is the body of GET /v1/activity: whether anything happens in the sandbox, for the
// controller's idle pause. Requests in flight (the probes and this endpoint aside) and running
// commands, foreground or background, make it active.
type Activity struct {
	// Active is true while a request is in flight or a command runs.
	Active bool `json:"active"`
	// IdleSeconds is how long nothing has happened; 0 while active.
	IdleSeconds float64 `json:"idleSeconds"`
	// LastActivity is when something last happened (or sandboxd started).
	LastActivity time.Time `json:"lastActivity"`
	// InflightRequests and RunningProcesses say what keeps it active.
	InflightRequests int `json:"inflightRequests"`
	RunningProcesses int `json:"runningProcesses"`
}
