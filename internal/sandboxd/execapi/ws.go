package execapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// firstMessageTimeout bounds how long an upgraded connection may sit idle
// before sending its exec spec.
const firstMessageTimeout = 30 * time.Second

// signals maps the names clients may send to signals. "SIG" is optional.
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
	"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2, "STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT,
	"TSTP": syscall.SIGTSTP, "WINCH": syscall.SIGWINCH, "ALRM": syscall.SIGALRM,
	"PIPE": syscall.SIGPIPE,
}

func parseSignal(name string) (syscall.Signal, error) {
	n := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG")
	if sig, ok := signals[n]; ok {
		return sig, nil
	}
	return 0, respond.BadRequest("unknown signal %q", name)
}

// ExecWS serves GET /v1/exec/ws: an interactive command over one
// WebSocket. The first text message is the ExecRequest; then stdin, eof,
// signal and resize frames flow in and output frames flow out, ending with
// an exit frame and a normal close.
func (h *Handler) ExecWS(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept already answered
	}
	defer conn.CloseNow()
	conn.SetReadLimit(8 << 20)
	// A hijacked connection's request context is not cancelled when the
	// peer goes away; our read loop notices instead and cancels this.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	sp, err := h.readWSSpec(ctx, conn)
	if err != nil {
		status, msg := respond.Status(err)
		h.log.Debug("websocket exec rejected", "status", status, "error", msg)
		_ = writeWSFrame(ctx, conn, wire.Frame{Type: wire.FrameError, Error: msg})
		_ = conn.Close(websocket.StatusPolicyViolation, truncate(msg, 120))
		return
	}

	fs := newFrameStream()
	started := make(chan *process.Command, 1)
	var res process.Result
	go func() {
		// No default timeout: an interactive session lasts as long as its
		// client, unless the spec asks for a limit.
		res = h.runner.Run(ctx, sp, true, fs.emit, func(c *process.Command) { started <- c })
		close(started)
		close(fs.ch)
	}()
	readerDone := make(chan struct{})
	if c, ok := <-started; ok {
		go func() {
			defer close(readerDone)
			h.wsReadLoop(ctx, conn, c)
			cancel() // client gone or broken: the command dies with it
		}()
	} else {
		close(readerDone)
	}

	for f := range fs.ch {
		if err := writeWSFrame(ctx, conn, f); err != nil {
			fs.abandon()
			cancel()
		}
	}
	h.runner.Observe("ws", res)
	_ = writeWSFrame(ctx, conn, wire.Frame{Type: wire.FrameExit, ExitCode: res.ExitCode, TimedOut: res.TimedOut})
	_ = conn.Close(websocket.StatusNormalClosure, "")
	cancel()
	<-readerDone
}

func (h *Handler) readWSSpec(ctx context.Context, conn *websocket.Conn) (*process.Spec, error) {
	rctx, cancel := context.WithTimeout(ctx, firstMessageTimeout)
	defer cancel()
	typ, data, err := conn.Read(rctx)
	if err != nil {
		return nil, respond.BadRequest("reading exec request: %v", err)
	}
	if typ != websocket.MessageText {
		return nil, respond.BadRequest("the first message must be a JSON text message")
	}
	var req wire.ExecRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, respond.BadRequest("invalid exec request: %v", err)
	}
	return h.runner.BuildSpec(ctx, &req, 0)
}

// wsReadLoop applies client frames to c until the connection ends.
func (h *Handler) wsReadLoop(ctx context.Context, conn *websocket.Conn, c *process.Command) {
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary { // raw stdin, no base64 needed
			c.SendStdin(data)
			continue
		}
		var f wire.Frame
		if err := json.Unmarshal(data, &f); err != nil {
			_ = writeWSFrame(ctx, conn, wire.Frame{Type: wire.FrameError, Error: "invalid frame: " + err.Error()})
			continue
		}
		if err := applyClientFrame(c, &f); err != nil {
			_ = writeWSFrame(ctx, conn, wire.Frame{Type: wire.FrameError, Error: err.Error()})
		}
	}
}

func applyClientFrame(c *process.Command, f *wire.Frame) error {
	switch f.Type {
	case wire.FrameStdin:
		c.SendStdin(f.Data)
	case wire.FrameStdinEOF:
		c.SendEOF()
	case wire.FrameSignal:
		sig, err := parseSignal(f.Signal)
		if err != nil {
			return err
		}
		if err := c.Signal(sig); err != nil {
			return fmt.Errorf("signal: %w", err)
		}
	case wire.FrameResize:
		if f.Cols == 0 || f.Rows == 0 {
			return errors.New("resize needs cols and rows")
		}
		if err := c.Resize(f.Cols, f.Rows); err != nil {
			return fmt.Errorf("resize: %w", err)
		}
	default:
		return fmt.Errorf("unknown frame type %q", f.Type)
	}
	return nil
}

func writeWSFrame(ctx context.Context, conn *websocket.Conn, f wire.Frame) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return conn.Write(wctx, websocket.MessageText, respond.Marshal(f))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
