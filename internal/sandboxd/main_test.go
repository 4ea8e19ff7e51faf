package sandboxd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testEnv is a Server behind a real httptest server (HTTP/1.1 + h2c).
type testEnv struct {
	t    testing.TB
	srv  *Server
	ts   *httptest.Server
	root string // the real root directory
}

func newEnv(t testing.TB, mods ...func(*Config)) *testEnv {
	t.Helper()
	cfg := Config{
		Root:        t.TempDir(),
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		KillGrace:   500 * time.Millisecond,
		ExecTimeout: time.Minute,
	}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	ts.Config.Protocols = &p
	ts.Start()
	t.Cleanup(func() {
		_ = s.Close() // kills commands so that no handler keeps ts.Close waiting
		ts.Close()
	})
	return &testEnv{t: t, srv: s, ts: ts, root: s.cfg.Root}
}

// request sends a request; body may be nil, []byte, string, io.Reader or a
// value to encode as JSON.
func (e *testEnv) request(ctx context.Context, method, path string, body any, hdr ...string) *http.Response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// do sends a request, checks the status and returns the body.
func (e *testEnv) do(method, path string, body any, wantStatus int, hdr ...string) []byte {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp := e.request(ctx, method, path, body, hdr...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != wantStatus {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.StatusCode, wantStatus, b)
	}
	return b
}

// doJSON is do plus decoding the response into out.
func (e *testEnv) doJSON(method, path string, body any, wantStatus int, out any) {
	e.t.Helper()
	b := e.do(method, path, body, wantStatus)
	if err := json.Unmarshal(b, out); err != nil {
		e.t.Fatalf("%s %s: decoding %q: %v", method, path, b, err)
	}
}

func (e *testEnv) writeFile(rel, content string) {
	e.t.Helper()
	p := e.root + "/" + rel
	if err := os.MkdirAll(p[:strings.LastIndexByte(p, '/')], 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// wantError checks a JSON error body.
func wantError(t testing.TB, body []byte, want string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if len(m) != 1 || m["error"] != want {
		t.Fatalf("error body %s, want {\"error\":%q}", body, want)
	}
}

// wantV1Error checks upstream's error shape {"code","message"}.
func wantV1Error(t testing.TB, body []byte, code, msg string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if len(m) != 2 || m["code"] != code || m["message"] != msg {
		t.Fatalf("error body %s, want {\"code\":%q,\"message\":%q}", body, code, msg)
	}
}

// wantAnyError checks an error message in either error shape: {"error"} of
// our own API or {"code","message"} of upstream's /v1/files.
func wantAnyError(t testing.TB, body []byte, msg string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if m["error"] != msg && m["message"] != msg {
		t.Fatalf("error body %s, want message %q", body, msg)
	}
}

// frameReader decodes NDJSON frames.
type frameReader struct {
	t  testing.TB
	sc *bufio.Scanner
}

func newFrameReader(t testing.TB, r io.Reader) *frameReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	return &frameReader{t: t, sc: sc}
}

func (fr *frameReader) next() (wire.Frame, bool) {
	fr.t.Helper()
	if !fr.sc.Scan() {
		return wire.Frame{}, false
	}
	var f wire.Frame
	if err := json.Unmarshal(fr.sc.Bytes(), &f); err != nil {
		fr.t.Fatalf("bad frame %q: %v", fr.sc.Bytes(), err)
	}
	return f, true
}

// collect reads frames to the end and returns stdout, stderr and the exit frame.
func (fr *frameReader) collect() (stdout, stderr string, exit wire.Frame) {
	fr.t.Helper()
	var out, errb strings.Builder
	for {
		f, ok := fr.next()
		if !ok {
			fr.t.Fatal("stream ended without an exit frame")
		}
		switch f.Type {
		case wire.FrameStdout:
			out.Write(f.Data)
		case wire.FrameStderr:
			errb.Write(f.Data)
		case wire.FrameExit:
			if _, more := fr.next(); more {
				fr.t.Fatal("frames after the exit frame")
			}
			return out.String(), errb.String(), f
		default:
			fr.t.Fatalf("unexpected frame %+v", f)
		}
	}
}

// processGone reports whether pid no longer runs (a zombie counts as gone:
// in a container nobody may reap an orphan).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// waitGone waits (generously) until pid is gone.
func waitGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func parsePID(t testing.TB, s string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || pid <= 0 {
		t.Fatalf("not a pid: %q", s)
	}
	return pid
}
