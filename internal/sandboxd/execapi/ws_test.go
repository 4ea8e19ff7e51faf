package execapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

type wsClient struct {
	t    *testing.T
	ctx  context.Context
	conn *websocket.Conn
	out  strings.Builder // stdout seen so far
	err  strings.Builder
	rerr error // the read error that ended the stream
}

func dialWS(t *testing.T, e *sandboxdtest.Env, spec any) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	url := "ws" + strings.TrimPrefix(e.TS.URL, "http") + "/v1/exec/ws"
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: e.TS.Client()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	c := &wsClient{t: t, ctx: ctx, conn: conn}
	c.send(spec)
	return c
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.conn.Write(c.ctx, websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

// next reads one frame; ok is false once the connection closed.
func (c *wsClient) next() (wire.Frame, bool) {
	c.t.Helper()
	typ, b, err := c.conn.Read(c.ctx)
	if err != nil {
		c.rerr = err
		return wire.Frame{}, false
	}
	if typ != websocket.MessageText {
		c.t.Fatalf("message type %v", typ)
	}
	var f wire.Frame
	if err := json.Unmarshal(b, &f); err != nil {
		c.t.Fatalf("bad frame %q: %v", b, err)
	}
	switch f.Type {
	case wire.FrameStdout:
		c.out.Write(f.Data)
	case wire.FrameStderr:
		c.err.Write(f.Data)
	}
	return f, true
}

// waitStdout reads until stdout contains s.
func (c *wsClient) waitStdout(s string) {
	c.t.Helper()
	for !strings.Contains(c.out.String(), s) {
		f, ok := c.next()
		if !ok || f.Type == wire.FrameExit {
			c.t.Fatalf("no %q in stdout %q (last frame %+v)", s, c.out.String(), f)
		}
	}
}

// waitExit reads to the exit frame and checks that the server then closes.
func (c *wsClient) waitExit() wire.Frame {
	c.t.Helper()
	for {
		f, ok := c.next()
		if !ok {
			c.t.Fatal("connection closed without an exit frame")
		}
		if f.Type == wire.FrameExit {
			if _, ok := c.next(); ok {
				c.t.Fatal("frames after exit")
			}
			if st := websocket.CloseStatus(c.rerr); st != websocket.StatusNormalClosure {
				c.t.Fatalf("close status %v", st)
			}
			return f
		}
	}
}

func TestWSStdinAndEOF(t *testing.T) {
	e := sandboxdtest.New(t)
	c := dialWS(t, e, wire.ExecRequest{Command: "cat; echo end >&2"})
	c.send(wire.Frame{Type: wire.FrameStdin, Data: []byte("hello\n")})
	c.waitStdout("hello\n")
	// Binary messages are raw stdin.
	if err := c.conn.Write(c.ctx, websocket.MessageBinary, []byte("raw\n")); err != nil {
		t.Fatal(err)
	}
	c.waitStdout("raw\n")
	c.send(wire.Frame{Type: wire.FrameStdinEOF})
	exit := c.waitExit()
	if exit.ExitCode != 0 || c.out.String() != "hello\nraw\n" || c.err.String() != "end\n" {
		t.Fatalf("exit %+v stdout %q stderr %q", exit, c.out.String(), c.err.String())
	}
}

func TestWSInitialStdin(t *testing.T) {
	e := sandboxdtest.New(t)
	c := dialWS(t, e, wire.ExecRequest{Argv: []string{"cat"}, Stdin: "first\n"})
	c.waitStdout("first\n")
	c.send(wire.Frame{Type: wire.FrameStdinEOF})
	if exit := c.waitExit(); exit.ExitCode != 0 {
		t.Fatalf("exit %+v", exit)
	}
}

func TestWSSignal(t *testing.T) {
	e := sandboxdtest.New(t)
	c := dialWS(t, e, wire.ExecRequest{Command: "trap 'echo caught; exit 7' INT; echo ready; while :; do sleep 0.05; done"})
	c.waitStdout("ready\n")
	c.send(wire.Frame{Type: wire.FrameSignal, Signal: "SIGINT"})
	if exit := c.waitExit(); exit.ExitCode != 7 || !strings.Contains(c.out.String(), "caught") {
		t.Fatalf("exit %+v stdout %q", exit, c.out.String())
	}
}

func TestWSErrorsKeepSessionAlive(t *testing.T) {
	e := sandboxdtest.New(t)
	c := dialWS(t, e, wire.ExecRequest{Argv: []string{"cat"}})
	c.send(wire.Frame{Type: wire.FrameSignal, Signal: "SIGNOPE"})
	f, _ := c.next()
	if f.Type != wire.FrameError || f.Error != `unknown signal "SIGNOPE"` {
		t.Fatalf("frame %+v", f)
	}
	c.send(map[string]string{"type": "bogus"})
	f, _ = c.next()
	if f.Type != wire.FrameError {
		t.Fatalf("frame %+v", f)
	}
	c.send(wire.Frame{Type: wire.FrameSignal, Signal: "TERM"})
	if exit := c.waitExit(); exit.ExitCode != 128+15 {
		t.Fatalf("exit %+v", exit)
	}
}

func TestWSPTY(t *testing.T) {
	e := sandboxdtest.New(t)
	c := dialWS(t, e, wire.ExecRequest{
		Command: "tty; test -t 0 && echo stdin-is-tty; stty size; read line; stty size; echo err >&2; exit 3",
		TTY:     true, Cols: 80, Rows: 24,
	})
	c.waitStdout("24 80")
	c.send(wire.Frame{Type: wire.FrameResize, Cols: 100, Rows: 30})
	c.send(wire.Frame{Type: wire.FrameStdin, Data: []byte("go\n")})
	c.waitStdout("30 100")
	exit := c.waitExit()
	out := c.out.String()
	if exit.ExitCode != 3 || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "stdin-is-tty") {
		t.Fatalf("exit %+v output %q", exit, out)
	}
	// With a terminal there is one stream: stderr arrives as stdout.
	if c.err.Len() != 0 || !strings.Contains(out, "err") {
		t.Fatalf("stderr %q stdout %q", c.err.String(), out)
	}
}

func TestWSPTYEOFEndsCat(t *testing.T) {
	e := sandboxdtest.New(t)
	c := dialWS(t, e, wire.ExecRequest{Argv: []string{"cat"}, TTY: true})
	c.send(wire.Frame{Type: wire.FrameStdin, Data: []byte("line\n")})
	c.waitStdout("line")
	c.send(wire.Frame{Type: wire.FrameStdinEOF})
	if exit := c.waitExit(); exit.ExitCode != 0 {
		t.Fatalf("exit %+v", exit)
	}
}

func TestWSDisconnectKillsProcessGroup(t *testing.T) {
	for _, tty := range []bool{false, true} {
		t.Run(map[bool]string{false: "pipes", true: "tty"}[tty], func(t *testing.T) {
			e := sandboxdtest.New(t)
			c := dialWS(t, e, wire.ExecRequest{Command: "sleep 300 & echo pid=$!; wait", TTY: tty})
			c.waitStdout("\n")
			out := c.out.String()
			pid := sandboxdtest.ParsePID(t, strings.TrimSpace(out[strings.Index(out, "pid=")+4:]))
			c.conn.CloseNow()
			sandboxdtest.WaitGone(t, pid)
		})
	}
}

func TestWSBadSpec(t *testing.T) {
	e := sandboxdtest.New(t)
	for _, spec := range []any{
		wire.ExecRequest{},
		wire.ExecRequest{Argv: []string{"true"}, Cwd: "../../etc"},
		"not an object",
	} {
		c := dialWS(t, e, spec)
		f, ok := c.next()
		if !ok || f.Type != wire.FrameError {
			t.Fatalf("frame %+v", f)
		}
		if _, ok := c.next(); ok {
			t.Fatal("frames after the error")
		}
		if st := websocket.CloseStatus(c.rerr); st != websocket.StatusPolicyViolation {
			t.Fatalf("close status %v", st)
		}
	}
}

func TestWSStartFailure(t *testing.T) {
	e := sandboxdtest.New(t)
	c := dialWS(t, e, wire.ExecRequest{Argv: []string{"no-such-binary-xyz"}})
	if exit := c.waitExit(); exit.ExitCode != 127 || !strings.Contains(c.err.String(), "command not found") {
		t.Fatalf("exit %+v stderr %q", exit, c.err.String())
	}
}
