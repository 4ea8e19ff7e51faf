package execapi

import (
	"bytes"
	"context"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// wantsNDJSON reports whether the client asked for a streamed response.
func wantsNDJSON(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && mt == wire.ContentTypeNDJSON {
			return true
		}
	}
	return false
}

// Exec serves POST /v1/exec, buffered or (Accept: application/x-ndjson)
// streamed.
func (h *Handler) Exec(w http.ResponseWriter, r *http.Request) {
	sp, err := h.readExecRequest(r, h.execTimeout)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	if wantsNDJSON(r) {
		h.execStream(w, r, sp)
		return
	}
	res := h.execBuffered(r.Context(), sp, "buffered")
	respond.JSON(w, http.StatusOK, res)
}

// execBuffered runs sp to completion and collects its output.
func (h *Handler) execBuffered(ctx context.Context, sp *process.Spec, mode string) wire.ExecResult {
	out, _ := h.runner.Collect(ctx, sp, mode)
	return out
}

// frameStream turns emit callbacks from the output readers into an ordered
// channel of frames for a single writer, and stops blocking the readers
// once the writer gave up (client gone).
type frameStream struct {
	ch       chan wire.Frame
	gone     chan struct{}
	goneOnce sync.Once
}

func newFrameStream() *frameStream {
	return &frameStream{ch: make(chan wire.Frame, 64), gone: make(chan struct{})}
}

var streamFrameTypes = [2]string{wire.FrameStdout, wire.FrameStderr}

func (fs *frameStream) emit(i int, p []byte) {
	f := wire.Frame{Type: streamFrameTypes[i], Data: bytes.Clone(p)}
	select {
	case fs.ch <- f:
	case <-fs.gone:
	}
}

func (fs *frameStream) abandon() { fs.goneOnce.Do(func() { close(fs.gone) }) }

// execStream runs sp and streams its output as NDJSON frames.
func (h *Handler) execStream(w http.ResponseWriter, r *http.Request, sp *process.Spec) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	nw := respond.NDJSON(w)
	fs := newFrameStream()
	var res process.Result
	go func() {
		res = h.runner.Run(ctx, sp, false, fs.emit, nil)
		close(fs.ch)
	}()
	for f := range fs.ch {
		if err := nw.Write(f, len(fs.ch) == 0); err != nil {
			fs.abandon()
			cancel() // nobody is listening: kill the command
		}
	}
	h.runner.Observe("stream", res)
	_ = nw.Write(wire.Frame{Type: wire.FrameExit, ExitCode: res.ExitCode, TimedOut: res.TimedOut}, true)
}

// readExecRequest decodes the ExecRequest body of an HTTP (non-WebSocket) exec, which cannot
// carry a terminal, into a spec; defaultTimeout applies when the request sets none.
func (h *Handler) readExecRequest(r *http.Request, defaultTimeout time.Duration) (*process.Spec, error) {
	var req wire.ExecRequest
	if err := respond.DecodeJSON(r, &req); err != nil {
		return nil, err
	}
	if req.TTY {
		return nil, respond.BadRequest("tty is only supported on /v1/exec/ws")
	}
	return h.runner.BuildSpec(r.Context(), &req, defaultTimeout)
}
