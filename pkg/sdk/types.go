package sdk

import (
	"context"
	"io"
	"io/fs"
	"time"
)

// Result is the outcome of a command run with Run. A command that ran and
// exited non-zero is a Result, not an error; use Result.Err to turn it into
// one.
type Result struct {
	// Stdout and Stderr hold the output (empty for a stream given to
	// WithStdout / WithStderr). They may contain any bytes.
	Stdout, Stderr string
	// ExitCode is the command's exit status; 124 after a timeout, 127 when
	// the program was not found, 128+n when killed by signal n.
	ExitCode int
	// TimedOut is set when WithTimeout, the context's deadline or sandboxd's default ended it.
	TimedOut bool
	// Truncated is set when output beyond the WithMaxOutput cap was dropped.
	Truncated bool
	// Duration is the wall-clock time of the call.
	Duration time.Duration
}

// Success reports whether the command exited 0 within its timeout.
func (r *Result) Success() bool { return r.ExitCode == 0 && !r.TimedOut }

// Err returns nil when the command succeeded, else an *ExitError.
func (r *Result) Err() error {
	if r.Success() {
		return nil
	}
	return &ExitError{ExitCode: r.ExitCode, TimedOut: r.TimedOut, Stderr: r.Stderr}
}

// Process describes a background process started with Start.
type Process struct {
	// ID names the process in Kill, Signal and the log calls.
	ID        string
	PID       int
	Argv      []string
	Command   string // the shell script, for Shell commands
	Cwd       string
	StartedAt time.Time
	Running   bool
	// ExitCode, ExitedAt and TimedOut are set once Running is false.
	ExitCode int
	ExitedAt time.Time
	TimedOut bool
}

// ProcessLogs is the retained output of a background process: sandboxd
// keeps the most recent output of each stream (1 MiB by default).
type ProcessLogs struct {
	Stdout, Stderr string
	// Truncated is set when older output was dropped.
	Truncated bool
}

// FileInfo describes a file in the sandbox. Stat and List describe a
// symlink itself, not what it points to.
type FileInfo struct {
	Name string
	// Path is relative to the sandbox root, slash-separated.
	Path       string
	Size       int64
	Mode       fs.FileMode // permission bits, plus fs.ModeDir / fs.ModeSymlink
	ModTime    time.Time
	IsDir      bool
	IsSymlink  bool
	LinkTarget string
}

// EventOp is the kind of a file system event.
type EventOp string

// File system event kinds.
const (
	OpCreate EventOp = "create"
	OpWrite  EventOp = "write"
	OpRemove EventOp = "remove"
	OpRename EventOp = "rename"
	OpChmod  EventOp = "chmod"
	// OpOverflow: the kernel dropped events; rescan if it matters.
	OpOverflow EventOp = "overflow"
)

// Event is one file system change reported by Files.Watch.
type Event struct {
	Op EventOp
	// Path is relative to the sandbox root.
	Path string
}

// transport is what a Sandbox handle needs from a connection mode. The
// transports:
//   - httpTransport (transport_http.go, commands in transport_http_run.go)
//     speaks sandboxd's HTTP API through an endpoint: routerEndpoint
//     (ModeRouter), directEndpoint (ModeDirect) or portForwardEndpoint
//     (ModePortForward, transport_http_portforward.go);
//   - kubeExecTransport (transport_kubeexec.go) runs shell commands through
//     the Kubernetes exec API (ModeExec), for images without sandboxd.
type transport interface {
	run(ctx context.Context, cmd Command, rc *runConfig) (*Result, error)
	start(ctx context.Context, cmd Command, rc *runConfig) (*Process, error)
	processes(ctx context.Context) ([]Process, error)
	process(ctx context.Context, id string) (*Process, error)
	signal(ctx context.Context, id, sig string) (*Process, error)
	kill(ctx context.Context, id string) (*Process, error)
	logs(ctx context.Context, id string) (*ProcessLogs, error)
	followLogs(ctx context.Context, id string, stdout, stderr io.Writer) (int, error)

	readFile(ctx context.Context, path string) (io.ReadCloser, error)
	writeFile(ctx context.Context, path string, r io.Reader, perm fs.FileMode) error
	remove(ctx context.Context, path string, recursive bool) error
	mkdir(ctx context.Context, path string, perm fs.FileMode) error
	stat(ctx context.Context, path string) (*FileInfo, error)
	list(ctx context.Context, path string, recursive bool) ([]FileInfo, error)
	getTar(ctx context.Context, dir string) (io.ReadCloser, error)
	putTar(ctx context.Context, dir string, r io.Reader) error
	watch(ctx context.Context, path string, recursive bool) (<-chan Event, error)

	// reset drops state tied to the current pod (a port-forward).
	reset()
}

func (c *Client) newTransport(s *Sandbox) transport {
	switch c.mode {
	case ModeExec:
		return newKubeExecTransport(c, s, &kubeExecRunner{c: c, s: s})
	case ModeRouter:
		return newHTTPTransport(c, &routerEndpoint{c: c, s: s})
	case ModePortForward:
		return newHTTPTransport(c, &portForwardEndpoint{c: c, s: s})
	default:
		return newHTTPTransport(c, &directEndpoint{c: c, s: s})
	}
}
