package sdk

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Limits of the streamed paths.
const (
	// maxInlineStdin is the largest in-memory stdin sent inside the request
	// (sandboxd reads JSON bodies up to 16 MiB; base64 grows it by 4/3).
	maxInlineStdin = 8 << 20
	// defaultStreamMaxOutput caps what a streamed run keeps per stream when
	// no writer takes it.
	defaultStreamMaxOutput = 64 << 20 // sandboxd's default --max-output
	// wsReadLimit bounds one WebSocket message (a base64 output frame).
	wsReadLimit = 16 << 20
)

func execRequest(cmd Command, rc *runConfig) (*wire.ExecRequest, error) {
	req := &wire.ExecRequest{Env: rc.env, Cwd: rc.cwd, MaxOutputBytes: rc.maxOutput}
	switch {
	case cmd.argv != nil:
		if len(cmd.argv) == 0 || cmd.argv[0] == "" {
			return nil, errors.New("empty command")
		}
		req.Argv = cmd.argv
	case cmd.shell != "":
		req.Command = cmd.shell
	default:
		return nil, errors.New("empty command")
	}
	if rc.timeout > 0 {
		req.TimeoutSeconds = rc.timeout.Seconds()
	}
	return req, nil
}

// inMemoryStdin reads r whole when it is an in-memory reader of at most
// maxInlineStdin bytes; ok is false for any other reader.
func inMemoryStdin(r io.Reader) (b64 string, ok bool, err error) {
	var n int
	switch v := r.(type) {
	case *bytes.Reader:
		n = v.Len()
	case *strings.Reader:
		n = v.Len()
	case *bytes.Buffer:
		n = v.Len()
	default:
		return "", false, nil
	}
	if n > maxInlineStdin {
		return "", false, nil
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return "", false, err
	}
	return base64.StdEncoding.EncodeToString(b), true, nil
}

// outputSink routes output frames to the caller's writers, or into capped
// buffers for the Result.
type outputSink struct {
	mu             sync.Mutex // exec mode writes both streams concurrently
	stdout, stderr io.Writer
	max            int64
	buf            [2]bytes.Buffer
	truncated      bool
	writeErr       error
}

func (o *outputSink) write(stream int, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.stdout
	if stream == 1 {
		w = o.stderr
	}
	if w != nil {
		if o.writeErr == nil {
			_, o.writeErr = w.Write(p)
		}
		return
	}
	b := &o.buf[stream]
	limit := o.max
	if limit <= 0 {
		limit = defaultStreamMaxOutput
	}
	if room := limit - int64(b.Len()); int64(len(p)) > room {
		p = p[:max(room, 0)]
		o.truncated = true
	}
	b.Write(p)
}

// writer adapts one stream of the sink to an io.Writer.
func (o *outputSink) writer(stream int) io.Writer { return sinkWriter{o, stream} }

type sinkWriter struct {
	o      *outputSink
	stream int
}

func (w sinkWriter) Write(p []byte) (int, error) {
	w.o.write(w.stream, p)
	return len(p), nil
}

func (o *outputSink) result(exit int, timedOut bool) *Result {
	o.mu.Lock()
	defer o.mu.Unlock()
	return &Result{Stdout: o.buf[0].String(), Stderr: o.buf[1].String(), ExitCode: exit, TimedOut: timedOut, Truncated: o.truncated}
}

// frameReader yields output frames: NDJSON lines or WebSocket messages.
type frameReader interface{ Decode(v any) error }

// readFrames consumes frames until the exit frame.
func readFrames(ctx context.Context, fr frameReader, sink *outputSink, op string) (*Result, error) {
	var lastErr string
	for {
		var f wire.Frame
		if err := fr.Decode(&f); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if lastErr != "" {
				return nil, &APIError{Status: http.StatusBadRequest, Message: lastErr, Op: op}
			}
			// The command may have run, or be running still: the router or the sandbox's pod
			// went away mid-stream.
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("sandbox API %s: %w: the stream ended without an exit status", op, ErrConnectionLost)
			}
			return nil, fmt.Errorf("sandbox API %s: %w: %w", op, ErrConnectionLost, err)
		}
		switch f.Type {
		case wire.FrameStdout:
			sink.write(0, f.Data)
		case wire.FrameStderr:
			sink.write(1, f.Data)
		case wire.FrameError:
			lastErr = f.Error
		case wire.FrameExit:
			if sink.writeErr != nil {
				return nil, fmt.Errorf("writing command output: %w", sink.writeErr)
			}
			return sink.result(f.ExitCode, f.TimedOut), nil
		}
	}
}

func (t *httpTransport) run(ctx context.Context, cmd Command, rc *runConfig) (*Result, error) {
	start := time.Now()
	req, err := execRequest(cmd, rc)
	if err != nil {
		return nil, err
	}
	useWS := rc.tty != nil
	if rc.stdin != nil && !useWS {
		b64, ok, err := inMemoryStdin(rc.stdin)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		if ok {
			req.StdinBase64 = b64
		} else {
			useWS = true
		}
	}
	var res *Result
	switch {
	case useWS:
		res, err = t.runWS(ctx, req, rc)
	case rc.stdout != nil || rc.stderr != nil:
		res, err = t.runStream(ctx, req, rc)
	default:
		res, err = t.runBuffered(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	res.Duration = time.Since(start)
	return res, nil
}

func (t *httpTransport) runBuffered(ctx context.Context, req *wire.ExecRequest) (*Result, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var er wire.ExecResult
	if err := t.doJSON(ctx, &request{method: http.MethodPost, path: "/v1/exec", body: body, contentType: wire.ContentTypeJSON}, &er); err != nil {
		return nil, err
	}
	return &Result{Stdout: er.Stdout, Stderr: er.Stderr, ExitCode: er.ExitCode, TimedOut: er.TimedOut,
		Truncated: er.StdoutTruncated || er.StderrTruncated}, nil
}

// runStream runs with Accept: application/x-ndjson: output frames arrive as
// the command writes them.
func (t *httpTransport) runStream(ctx context.Context, req *wire.ExecRequest, rc *runConfig) (*Result, error) {
	maxOutput := req.MaxOutputBytes
	req.MaxOutputBytes = 0 // a buffered-mode setting; the client caps streams
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	resp, err := t.do(ctx, &request{method: http.MethodPost, path: "/v1/exec", body: body,
		contentType: wire.ContentTypeJSON, accept: wire.ContentTypeNDJSON})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sink := &outputSink{stdout: rc.stdout, stderr: rc.stderr, max: maxOutput}
	return readFrames(ctx, json.NewDecoder(resp.Body), sink, "POST /v1/exec")
}

// runWS runs over GET /v1/exec/ws: stdin streams in as it is read, output
// streams out, and a TTY can be resized.
func (t *httpTransport) runWS(ctx context.Context, req *wire.ExecRequest, rc *runConfig) (*Result, error) {
	const op = "GET /v1/exec/ws"
	maxOutput := req.MaxOutputBytes
	req.MaxOutputBytes = 0
	if rc.tty != nil {
		req.TTY, req.Cols, req.Rows = true, rc.tty.Cols, rc.tty.Rows
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var conn *websocket.Conn
	var lag routerLag
	dials := 0
	for {
		hreq, err := t.newRequest(ctx, &request{method: http.MethodGet, path: "/v1/exec/ws"})
		if err != nil {
			return nil, err
		}
		u := *hreq.URL
		u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
		c, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: t.c.http.ws, HTTPHeader: hreq.Header})
		if err == nil {
			conn = c
			break
		}
		if resp != nil && resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusSwitchingProtocols {
			apiErr := readAPIError(resp, op)
			if resp.Body != nil {
				resp.Body.Close()
			}
			if lag.retry(ctx, t.ep, apiErr) {
				continue
			}
			return nil, apiErr
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if isDialError(err) && t.ep.dialFailed(ctx, dials) {
			dials++
			continue
		}
		return nil, fmt.Errorf("sandbox API %s: %w", op, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(wsReadLimit)

	first, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if err := conn.Write(ctx, websocket.MessageText, first); err != nil {
		return nil, fmt.Errorf("sandbox API %s: sending the command: %w", op, err)
	}
	if rc.stdin != nil {
		go pumpStdin(ctx, conn, rc.stdin)
	} else if rc.tty == nil { // no input: let readers of stdin see EOF
		eof, _ := json.Marshal(wire.Frame{Type: wire.FrameStdinEOF})
		if err := conn.Write(ctx, websocket.MessageText, eof); err != nil {
			return nil, fmt.Errorf("sandbox API %s: %w", op, err)
		}
	}
	if rc.tty != nil && rc.tty.Resize != nil {
		go forwardResizes(ctx, conn, rc.tty.Resize)
	}
	sink := &outputSink{stdout: rc.stdout, stderr: rc.stderr, max: maxOutput}
	return readFrames(ctx, wsFrames{ctx: ctx, conn: conn}, sink, op)
}

// pumpStdin copies r to the command as binary messages, then sends
// stdin_eof. It ends with ctx; a Read that blocks forever keeps it alive
// until the reader returns.
func pumpStdin(ctx context.Context, conn *websocket.Conn, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			eof, _ := json.Marshal(wire.Frame{Type: wire.FrameStdinEOF})
			_ = conn.Write(ctx, websocket.MessageText, eof)
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func forwardResizes(ctx context.Context, conn *websocket.Conn, sizes <-chan TermSize) {
	for {
		select {
		case <-ctx.Done():
			return
		case sz, ok := <-sizes:
			if !ok {
				return
			}
			if sz.Cols == 0 || sz.Rows == 0 {
				continue
			}
			b, _ := json.Marshal(wire.Frame{Type: wire.FrameResize, Cols: sz.Cols, Rows: sz.Rows})
			if conn.Write(ctx, websocket.MessageText, b) != nil {
				return
			}
		}
	}
}

// wsFrames decodes one frame per WebSocket text message.
type wsFrames struct {
	ctx  context.Context
	conn *websocket.Conn
}

func (w wsFrames) Decode(v any) error {
	for {
		typ, data, err := w.conn.Read(w.ctx)
		if err != nil {
			if websocket.CloseStatus(err) != -1 {
				return io.EOF
			}
			return err
		}
		if typ != websocket.MessageText {
			continue
		}
		return json.Unmarshal(data, v)
	}
}
