package sdk

import (
	"context"
	"io"
	"slices"
	"strings"
	"time"
)

func newRunConfig(opts []RunOption) *runConfig {
	rc := &runConfig{}
	for _, o := range opts {
		if o != nil {
			o.applyRun(rc)
		}
	}
	return rc
}

// Run runs cmd in the sandbox and waits for it to end. Output is collected
// into the Result, or streamed as it is produced to WithStdout/WithStderr
// writers; WithStdin feeds input. A non-zero exit is reported in the Result,
// not as an error; errors are about reaching the sandbox (ErrNotReady,
// *APIError, the context's end).
//
//	res, err := sb.Run(ctx, sdk.Shell("make test"), sdk.WithCwd("repo"), sdk.WithTimeout(30*time.Minute))
//	res, err := sb.Run(ctx, sdk.Argv("python3", "-c", code), sdk.WithEnv(map[string]string{"PYTHONUNBUFFERED": "1"}))
func (s *Sandbox) Run(ctx context.Context, cmd Command, opts ...RunOption) (*Result, error) {
	rc := newRunConfig(opts)
	deadlineTimeout(ctx, rc)
	return s.tr.run(ctx, cmd, rc)
}

// deadlineTimeout makes the context's deadline the command's timeout when WithTimeout is not
// given: otherwise sandboxd's default (--exec-timeout, 300s) would end a command the caller
// allowed to run for longer, and the command would not end with the caller either.
func deadlineTimeout(ctx context.Context, rc *runConfig) {
	if rc.timeout > 0 {
		return
	}
	if dl, ok := ctx.Deadline(); ok {
		// A deadline already past leaves the transport to report the context's error.
		rc.timeout = max(time.Until(dl), time.Millisecond)
	}
}

// Start launches cmd in the background and returns at once; the process
// outlives the call (and the client). WithEnv, WithCwd, WithTimeout and an
// in-memory WithStdin apply. In ModeExec the process is detached (SIGHUP ignored, no terminal)
// and only Kill and Signal work on it.
func (s *Sandbox) Start(ctx context.Context, cmd Command, opts ...RunOption) (*Process, error) {
	return s.tr.start(ctx, cmd, newRunConfig(opts))
}

// Processes lists the background processes sandboxd knows, running and
// recently exited, oldest first.
func (s *Sandbox) Processes(ctx context.Context) ([]Process, error) { return s.tr.processes(ctx) }

// Process reports one background process.
func (s *Sandbox) Process(ctx context.Context, id string) (*Process, error) {
	return s.tr.process(ctx, id)
}

// Signal sends a signal ("TERM", "INT", "HUP", "KILL", ...) to a background
// process's process group.
func (s *Sandbox) Signal(ctx context.Context, id, signal string) error {
	_, err := s.tr.signal(ctx, id, signal)
	return err
}

// Kill kills a background process's process group (SIGTERM, then SIGKILL
// after a grace period), waits for it to exit, forgets it and returns its
// final state.
func (s *Sandbox) Kill(ctx context.Context, id string) (*Process, error) { return s.tr.kill(ctx, id) }

// ProcessLogs returns the output a background process produced so far.
func (s *Sandbox) ProcessLogs(ctx context.Context, id string) (*ProcessLogs, error) {
	return s.tr.logs(ctx, id)
}

// FollowLogs streams a background process's output (what is retained, then
// new output as it comes) to stdout and stderr until it exits, and returns
// its exit code.
func (s *Sandbox) FollowLogs(ctx context.Context, id string, stdout, stderr io.Writer) (int, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	return s.tr.followLogs(ctx, id, stdout, stderr)
}

func sortFileInfos(fis []FileInfo) {
	slices.SortFunc(fis, func(a, b FileInfo) int { return strings.Compare(a.Path, b.Path) })
}
