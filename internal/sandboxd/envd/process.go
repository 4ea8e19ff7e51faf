package envd

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process"
	"github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process/envdprocessconnect"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// defaultKeepalive is how often a quiet stream gets a keepalive event
// when the client names no interval (envd's default).
const defaultKeepalive = 90 * time.Second

// processService implements envd's process.Process on the sandboxd runner.
type processService struct {
	envdprocessconnect.UnimplementedProcessHandler
	s *Service
}

var _ envdprocessconnect.ProcessHandler = (*processService)(nil)

// Start runs the command and follows it. The command outlives the stream;
// the call's Connect-Timeout-Ms bounds the command's life, as in envd.
func (ps *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	timeout, err := callTimeout(req.Header())
	if err != nil {
		return err
	}
	p, sub, err := ps.s.startProcess(ctx, req.Msg, timeout)
	if err != nil {
		return err
	}
	return follow(ctx, p, sub, nil, keepaliveInterval(req.Header()), func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.StartResponse{Event: ev})
	})
}

// Connect follows a process that is running or recently ended.
func (ps *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	p, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	sub, end := p.subscribe()
	return follow(ctx, p, sub, end, keepaliveInterval(req.Header()), func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.ConnectResponse{Event: ev})
	})
}

// List describes the running processes.
func (ps *processService) List(context.Context, *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	return connect.NewResponse(&pb.ListResponse{Processes: ps.s.procs.list()}), nil
}

// SendInput writes to a process's stdin or terminal.
func (ps *processService) SendInput(_ context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	p, err := ps.s.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := writeInput(p, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// StreamInput feeds the process named by the first message with the data
// of the following ones, in order.
func (ps *processService) StreamInput(_ context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	var p *proc
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *pb.StreamInputRequest_Start:
			found, err := ps.s.procs.findRunning(ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			p = found
		case *pb.StreamInputRequest_Data:
			if p == nil {
				return nil, invalidf("the first message must name the process (start)")
			}
			if err := writeInput(p, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		case *pb.StreamInputRequest_Keepalive:
		default:
			return nil, invalidf("unknown input event")
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

// SendSignal signals the process's group.
func (ps *processService) SendSignal(_ context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	sig, err := signalOf(req.Msg.GetSignal())
	if err != nil {
		return nil, err
	}
	p, err := ps.s.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Signal(sig); err != nil {
		return nil, notFoundf("process %d: %v", p.info.Pid, err)
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

// CloseStdin ends a pipe-backed process's stdin.
func (ps *processService) CloseStdin(_ context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	p, err := ps.s.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.pty {
		return nil, preconditionf("process %d runs on a terminal: send Ctrl+D (0x04) instead", p.info.Pid)
	}
	if !p.cmd.StdinOpen() {
		return nil, preconditionf("stdin of process %d is not open", p.info.Pid)
	}
	p.cmd.SendEOF()
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

// Update resizes the process's terminal.
func (ps *processService) Update(_ context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	p, err := ps.s.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	size := req.Msg.GetPty().GetSize()
	if size == nil {
		return connect.NewResponse(&pb.UpdateResponse{}), nil
	}
	if !p.pty {
		return nil, preconditionf("process %d has no terminal", p.info.Pid)
	}
	cols, rows, err := termSize(size)
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Resize(cols, rows); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}

func writeInput(p *proc, in *pb.ProcessInput) error {
	var data []byte
	switch v := in.GetInput().(type) {
	case *pb.ProcessInput_Stdin:
		if p.pty {
			return preconditionf("process %d runs on a terminal: send pty input", p.info.Pid)
		}
		data = v.Stdin
	case *pb.ProcessInput_Pty:
		if !p.pty {
			return preconditionf("process %d has no terminal: send stdin input", p.info.Pid)
		}
		data = v.Pty
	default:
		return invalidf("input (stdin or pty) is required")
	}
	if !p.cmd.StdinOpen() {
		return preconditionf("stdin of process %d is not open (start it with stdin: true)", p.info.Pid)
	}
	p.cmd.SendStdin(data)
	return nil
}

func termSize(size *pb.PTY_Size) (cols, rows uint16, err error) {
	if size.GetCols() == 0 || size.GetRows() == 0 || size.GetCols() > math.MaxUint16 || size.GetRows() > math.MaxUint16 {
		return 0, 0, invalidf("terminal size %dx%d: cols and rows must be 1..65535", size.GetCols(), size.GetRows())
	}
	return uint16(size.GetCols()), uint16(size.GetRows()), nil
}

// startProcess starts req's command, registered and followed by the
// returned subscriber from its first byte of output.
func (s *Service) startProcess(ctx context.Context, req *pb.StartRequest, timeout time.Duration) (*proc, *subscriber, error) {
	cfg := req.GetProcess()
	if cfg.GetCmd() == "" {
		return nil, nil, invalidf("process.cmd is required")
	}
	ereq := &wire.ExecRequest{Argv: append([]string{cfg.GetCmd()}, cfg.GetArgs()...), Env: cfg.GetEnvs(), Cwd: cfg.GetCwd()}
	if req.Pty != nil {
		cols, rows, err := termSize(req.GetPty().GetSize())
		if err != nil {
			return nil, nil, err
		}
		ereq.TTY, ereq.Cols, ereq.Rows = true, cols, rows
	}
	specCtx := process.WithSessionEnv(ctx, s.commandEnv(ctx))
	sp, err := s.cfg.Runner.BuildSpec(specCtx, ereq, 0)
	if err == nil && notInstalled(sp) && path.Base(cfg.GetCmd()) == "bash" && s.cfg.Shell != "" {
		// The SDK runs every command string as /bin/bash -l -c (a terminal as
		// bash -i -l); an image without bash runs them under its own shell,
		// which takes the same options, rather than failing them all.
		ereq.Argv[0] = s.cfg.Shell
		sp, err = s.cfg.Runner.BuildSpec(specCtx, ereq, 0)
	}
	if err != nil {
		return nil, nil, toConnect(err)
	}
	keepStdin := ereq.TTY || req.Stdin == nil || req.GetStdin()
	cmd, err := s.cfg.Runner.Start(sp, keepStdin)
	if err != nil {
		var se *process.StartError
		if errors.As(err, &se) {
			return nil, nil, invalidf("%s", se.Msg)
		}
		return nil, nil, connect.NewError(connect.CodeInternal, err)
	}
	info := &pb.ProcessInfo{Config: cfg, Pid: uint32(cmd.PID()), Tag: req.Tag}
	p := &proc{cmd: cmd, info: info, pty: ereq.TTY, subs: map[*subscriber]struct{}{}, done: make(chan struct{})}
	sub, _ := p.subscribe()
	if err := s.procs.add(p); err != nil {
		cmd.Kill()
		<-cmd.Exited()
		cmd.PumpOutput(func(int, []byte) {})
		return nil, nil, connect.NewError(connect.CodeUnavailable, err)
	}
	go func() {
		defer s.procs.wg.Done()
		p.run(timeout, s.cfg.Runner.KillGrace())
	}()
	return p, sub, nil
}

// notInstalled says whether the executable a spec resolved to is missing
// (a relative path counts from the command's directory).
func notInstalled(sp *process.Spec) bool {
	if sp.Path == "" {
		return true
	}
	p := sp.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(sp.Dir, p)
	}
	_, err := os.Stat(p)
	return errors.Is(err, fs.ErrNotExist)
}

// commandEnv is the environment /init set, under the session's (the
// router's header), which the request context may carry.
func (s *Service) commandEnv(ctx context.Context) map[string]string {
	env := s.initEnv()
	maps.Copy(env, process.SessionEnv(ctx))
	return env
}

// follow streams a start event, then p's events from sub (or just end,
// when p had ended before sub could join), with keepalives when quiet,
// until the end event or the client leaves.
func follow(ctx context.Context, p *proc, sub *subscriber, end *pb.ProcessEvent_EndEvent, every time.Duration, send func(*pb.ProcessEvent) error) error {
	start := &pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: p.info.Pid}}}
	if sub == nil {
		if err := send(start); err != nil {
			return err
		}
		return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}})
	}
	defer p.unsubscribe(sub)
	if err := send(start); err != nil {
		return err
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case ev := <-sub.ch:
			if err := send(ev); err != nil {
				return err
			}
			if ev.GetEnd() != nil {
				return nil
			}
			tick.Reset(every)
		}
	}
}

// keepaliveInterval reads the client's Keepalive-Ping-Interval (seconds).
func keepaliveInterval(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval"))
	if err != nil || n <= 0 {
		return defaultKeepalive
	}
	return time.Duration(n) * time.Second
}

// callTimeout reads the Connect protocol's Connect-Timeout-Ms; 0 when
// absent (no limit).
func callTimeout(h http.Header) (time.Duration, error) {
	v := h.Get("Connect-Timeout-Ms")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalidf("invalid Connect-Timeout-Ms %q", v)
	}
	return time.Duration(n) * time.Millisecond, nil
}
