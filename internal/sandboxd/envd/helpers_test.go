package envd_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/envd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/filesystem/envdfilesystemconnect"
	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process"
	"github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process/envdprocessconnect"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is an envd Service on a fresh root behind an HTTP/1.1 + h2c test
// server, with Connect clients speaking JSON as E2B's SDK does.
type env struct {
	t      testing.TB
	root   string // real path of the root
	svc    *envd.Service
	ts     *httptest.Server
	hc     *http.Client // h2c, so client streams work
	proc   envdprocessconnect.ProcessClient
	fs     envdfilesystemconnect.FilesystemClient
	header http.Header // sent on every RPC
}

type envOption func(*envd.Config)

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root, err := rootfs.Open(filepath.Join(dir, "root"))
	if err != nil {
		t.Fatal(err)
	}
	runner := process.NewRunner(root.Resolver(), process.Config{Shell: "/bin/sh", MaxOutput: 1 << 20, KillGrace: 200 * time.Millisecond})
	cfg := envd.Config{FS: root, Runner: runner, Shell: "/bin/sh", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	svc := envd.New(cfg)
	ts := httptest.NewUnstartedServer(svc)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	ts.Config.Protocols = &p
	ts.Start()
	var cp http.Protocols
	cp.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &cp, DialContext: (&net.Dialer{}).DialContext}}
	e := &env{t: t, root: root.Dir(), svc: svc, ts: ts, hc: hc, header: http.Header{}}
	headers := connect.WithInterceptors(headerInterceptor{e})
	e.proc = envdprocessconnect.NewProcessClient(hc, ts.URL, connect.WithProtoJSON(), headers)
	e.fs = envdfilesystemconnect.NewFilesystemClient(hc, ts.URL, connect.WithProtoJSON(), headers)
	t.Cleanup(func() {
		svc.Close()
		ts.Close()
		hc.CloseIdleConnections()
		_ = root.Close()
	})
	return e
}

// headerInterceptor adds env.header to every call.
type headerInterceptor struct{ e *env }

func (h headerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		copyHeader(req.Header(), h.e.header)
		return next(ctx, req)
	}
}

func (h headerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		copyHeader(conn.RequestHeader(), h.e.header)
		return conn
	}
}

func (h headerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
}

// write puts a file under the root.
func (e *env) write(rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// wantCode fails unless err is a Connect error with code want.
func wantCode(t *testing.T, what string, err error, want connect.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, want)
	}
	if got := connect.CodeOf(err); got != want {
		t.Fatalf("%s: code %v (%v), want %v", what, got, err, want)
	}
}

// run is a finished command's output as the stream delivered it.
type run struct {
	pid                 uint32
	stdout, stderr, pty string
	keepalives          int
	end                 *pb.ProcessEvent_EndEvent
}

// collect reads a process event stream to its end.
func collect[T any, P interface {
	*T
	GetEvent() *pb.ProcessEvent
}](t *testing.T, s *connect.ServerStreamForClient[T]) (run, error) {
	t.Helper()
	var r run
	for s.Receive() {
		ev := P(s.Msg()).GetEvent()
		switch {
		case ev.GetStart() != nil:
			r.pid = ev.GetStart().GetPid()
		case ev.GetKeepalive() != nil:
			r.keepalives++
		case ev.GetEnd() != nil:
			r.end = ev.GetEnd()
		case ev.GetData() != nil:
			d := ev.GetData()
			r.stdout += string(d.GetStdout())
			r.stderr += string(d.GetStderr())
			r.pty += string(d.GetPty())
		}
	}
	return r, s.Err()
}

// startShell starts `/bin/sh -c script` and waits for its start event.
func (e *env) startShell(ctx context.Context, script string, mods ...func(*pb.StartRequest)) (*connect.ServerStreamForClient[pb.StartResponse], uint32) {
	e.t.Helper()
	req := &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}}
	for _, m := range mods {
		m(req)
	}
	s, err := e.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		e.t.Fatal(err)
	}
	if !s.Receive() {
		e.t.Fatalf("no start event: %v", s.Err())
	}
	pid := s.Msg().GetEvent().GetStart().GetPid()
	if pid == 0 {
		e.t.Fatalf("first event %v, want a start event with a pid", s.Msg())
	}
	return s, pid
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pidSel(pid uint32) *pb.ProcessSelector {
	return &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
}
