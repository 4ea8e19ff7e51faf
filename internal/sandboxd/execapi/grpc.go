package execapi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	processv1 "github.com/agent-sandbox/agent-sandbox/pkg/proto/process/v1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// NewProcessService returns upstream's ProcessService on runner's
// commands (see processService).
func NewProcessService(runner *process.Runner) processv1.ProcessServiceServer {
	return &processService{runner: runner, procs: map[int32]*process.Command{}}
}

// processService serves upstream's process.v1.ProcessService (the runtime
// API of upstream's sandboxd, which both upstream SDKs use in their sandboxd
// mode) on the machinery of the HTTP API: BuildSpec validates, Run starts,
// pumps and reaps, so a command behaves the same whichever API started it.
// Answers follow upstream's server: a command that cannot start is a
// NOT_FOUND or PERMISSION_DENIED error, a cwd outside the root is
// PERMISSION_DENIED, a process killed by a signal exits with -1.
type processService struct {
	processv1.UnimplementedProcessServiceServer
	runner *process.Runner

	mu    sync.Mutex
	procs map[int32]*process.Command // commands started with Start, by pid, while they run
}

// spec validates a ProcessConfig like an HTTP exec request. No server-side
// timeout applies (as upstream): the client's deadline or cancellation ends
// the command.
func (p *processService) spec(ctx context.Context, cfg *processv1.ProcessConfig, pty *processv1.PTY) (*process.Spec, error) {
	if len(cfg.GetCommand()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "command is required")
	}
	ctx, err := withSessionEnvFromMetadata(ctx)
	if err != nil {
		return nil, err
	}
	req := &wire.ExecRequest{Argv: cfg.GetCommand(), Env: cfg.GetEnvVars(), Cwd: cfg.GetCwd()}
	if pty != nil {
		req.TTY, req.Cols, req.Rows = true, uint16(min(pty.GetCols(), 0xffff)), uint16(min(pty.GetRows(), 0xffff))
	}
	sp, err := p.runner.BuildSpec(ctx, req, 0)
	if err != nil {
		return nil, grpcError(err)
	}
	if sp.Path == "" {
		return nil, status.Errorf(codes.NotFound, "failed to start command: command or path not found: %s", sp.Argv[0])
	}
	return sp, nil
}

// grpcError maps a validation error to a status: an escape is
// PERMISSION_DENIED, a missing cwd NOT_FOUND, anything else INVALID_ARGUMENT.
func grpcError(err error) error {
	st, msg := respond.Status(err)
	switch {
	case st == 403:
		return status.Error(codes.PermissionDenied, msg)
	case strings.Contains(msg, syscall.ENOENT.Error()):
		return status.Error(codes.NotFound, msg)
	case st >= 500:
		return status.Error(codes.Internal, msg)
	}
	return status.Error(codes.InvalidArgument, msg)
}

// startFailure turns a command that could not start into upstream's error.
func startFailure(se *process.StartError) error {
	msg := strings.TrimSpace(se.Msg)
	if se.Code == 127 {
		return status.Errorf(codes.NotFound, "failed to start command: command or path not found: %s", msg)
	}
	return status.Errorf(codes.PermissionDenied, "failed to start command: %s", msg)
}

// grpcExitCode follows upstream (os/exec's ExitCode): -1 for a signal.
func grpcExitCode(res process.Result) int32 {
	if res.Signal != 0 {
		return -1
	}
	return int32(res.ExitCode)
}

// withSessionEnvFromMetadata reads the session's environment from the call's metadata (the
// router's X-Sandbox-Session-Env header, on either gRPC port).
func withSessionEnvFromMetadata(ctx context.Context) (context.Context, error) {
	env, err := wire.SessionEnvFromValues(metadata.ValueFromIncomingContext(ctx, strings.ToLower(wire.HeaderSessionEnv)))
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return process.WithSessionEnv(ctx, env), nil
}

// Execute runs a command to completion. Output over the cap is reported on
// stderr with a non-zero exit code, never dropped silently.
func (p *processService) Execute(ctx context.Context, req *processv1.ExecuteRequest) (*processv1.ExecuteResponse, error) {
	sp, err := p.spec(ctx, req.GetConfig(), nil)
	if err != nil {
		return nil, err
	}
	out, res := p.runner.Collect(ctx, sp, "grpc")
	if res.StartErr != nil {
		return nil, startFailure(res.StartErr)
	}
	resp := &processv1.ExecuteResponse{ExitCode: grpcExitCode(res), Stdout: []byte(out.Stdout), Stderr: []byte(out.Stderr)}
	stderr, code := p.runner.NoteTruncation(out, string(resp.Stderr), int(resp.ExitCode))
	resp.Stderr, resp.ExitCode = []byte(stderr), int32(code)
	return resp, nil
}

// Start runs a command and streams its events: init, output as it comes,
// exit. The command keeps stdin open for WriteStdin; a client that goes away
// kills it.
func (p *processService) Start(req *processv1.StartRequest, stream grpc.ServerStreamingServer[processv1.StartResponse]) error {
	sp, err := p.spec(stream.Context(), req.GetConfig(), req.GetPty())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	fs := newFrameStream()
	started := make(chan *process.Command, 1)
	var res process.Result
	go func() {
		res = p.runner.Run(ctx, sp, true, fs.emit, func(c *process.Command) { started <- c })
		close(started)
		close(fs.ch)
	}()
	c, ok := <-started
	if !ok { // could not start: drain the stderr frame it emitted
		for range fs.ch {
		}
		return startFailure(res.StartErr)
	}
	pid := int32(c.PID())
	p.register(pid, c)
	defer p.unregister(pid, c)
	if err := stream.Send(&processv1.StartResponse{Event: &processv1.StartResponse_Init{Init: &processv1.InitEvent{ProcessId: pid}}}); err != nil {
		cancel()
	}
	for f := range fs.ch {
		ev := &processv1.StartResponse{Event: &processv1.StartResponse_Stdout{Stdout: f.Data}}
		if f.Type == wire.FrameStderr {
			ev.Event = &processv1.StartResponse_Stderr{Stderr: f.Data}
		}
		if err := stream.Send(ev); err != nil {
			fs.abandon()
			cancel() // nobody is listening: kill the command
		}
	}
	p.runner.Observe("grpc.stream", res)
	return stream.Send(&processv1.StartResponse{Event: &processv1.StartResponse_Exit{Exit: &processv1.ExitEvent{ExitCode: grpcExitCode(res)}}})
}

func (p *processService) register(pid int32, c *process.Command) {
	p.mu.Lock()
	p.procs[pid] = c
	p.mu.Unlock()
}

func (p *processService) unregister(pid int32, c *process.Command) {
	p.mu.Lock()
	if p.procs[pid] == c {
		delete(p.procs, pid)
	}
	p.mu.Unlock()
}

func (p *processService) lookup(pid int32) (*process.Command, error) {
	p.mu.Lock()
	c := p.procs[pid]
	p.mu.Unlock()
	if c == nil {
		return nil, status.Errorf(codes.NotFound, "process %d not found", pid)
	}
	return c, nil
}

// WriteStdin queues input (or end of input) for a running command, behind
// what came before.
func (p *processService) WriteStdin(_ context.Context, req *processv1.WriteStdinRequest) (*processv1.WriteStdinResponse, error) {
	c, err := p.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	switch {
	case req.GetEof() != nil:
		c.SendEOF()
	case len(req.GetInput()) > 0:
		c.SendStdin(req.GetInput())
	}
	return &processv1.WriteStdinResponse{}, nil
}

var grpcSignals = map[processv1.Signal]syscall.Signal{
	processv1.Signal_SIGNAL_SIGINT:  syscall.SIGINT,
	processv1.Signal_SIGNAL_SIGKILL: syscall.SIGKILL,
	processv1.Signal_SIGNAL_SIGTERM: syscall.SIGTERM,
}

// SendSignal signals the command's process group.
func (p *processService) SendSignal(_ context.Context, req *processv1.SendSignalRequest) (*processv1.SendSignalResponse, error) {
	c, err := p.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	sig, ok := grpcSignals[req.GetSignal()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unsupported or unspecified signal: %v", req.GetSignal())
	}
	if err := c.Signal(sig); err != nil {
		return nil, status.Errorf(codes.NotFound, "process %d: %v", req.GetProcessId(), err)
	}
	return &processv1.SendSignalResponse{}, nil
}

// ResizeTTY resizes the terminal of a command started with a PTY.
func (p *processService) ResizeTTY(_ context.Context, req *processv1.ResizeTTYRequest) (*processv1.ResizeTTYResponse, error) {
	c, err := p.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	if !c.HasTTY() {
		return nil, status.Errorf(codes.FailedPrecondition, "failed to resize TTY: process %d has no terminal", req.GetProcessId())
	}
	if req.GetCols() == 0 || req.GetRows() == 0 || req.GetCols() > 0xffff || req.GetRows() > 0xffff {
		return nil, status.Error(codes.InvalidArgument, "cols and rows must be between 1 and 65535")
	}
	if err := c.Resize(uint16(req.GetCols()), uint16(req.GetRows())); err != nil {
		return nil, status.Error(codes.Internal, fmt.Sprintf("failed to resize TTY: %v", err))
	}
	return &processv1.ResizeTTYResponse{}, nil
}
