// Package sandboxdtest runs a whole sandboxd Server behind a real HTTP test
// server (HTTP/1.1 and h2c) for the tests of sandboxd and its subpackages,
// and holds the helpers those tests share: requests, error shapes, NDJSON
// frames, process checks and file tree snapshots.
package sandboxdtest

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
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Env is a Server behind a real httptest server (HTTP/1.1 + h2c).
type Env struct {
	T    testing.TB
	Srv  *sandboxd.Server
	TS   *httptest.Server
	Root string // the real root directory
}

// New starts a Server on a fresh root with a quiet logger, a short kill
// grace and a one-minute exec timeout; mods adjust the Config. Cleanup
// closes both servers.
func New(t testing.TB, mods ...func(*sandboxd.Config)) *Env {
	t.Helper()
	cfg := sandboxd.Config{
		Root:        t.TempDir(),
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		KillGrace:   500 * time.Millisecond,
		ExecTimeout: time.Minute,
	}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := sandboxd.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root, err := realPath(cfg.Root) // what the Server reports as its root
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
	return &Env{T: t, Srv: s, TS: ts, Root: root}
}

// Request sends a request; body may be nil, []byte, string, io.Reader or a
// value to encode as JSON.
func (e *Env) Request(ctx context.Context, method, path string, body any, hdr ...string) *http.Response {
	e.T.Helper()
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
			e.T.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.TS.URL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.TS.Client().Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// Do sends a request, checks the status and returns the body.
func (e *Env) Do(method, path string, body any, wantStatus int, hdr ...string) []byte {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp := e.Request(ctx, method, path, body, hdr...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatal(err)
	}
	if resp.StatusCode != wantStatus {
		e.T.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.StatusCode, wantStatus, b)
	}
	return b
}

// DoJSON is Do plus decoding the response into out.
func (e *Env) DoJSON(method, path string, body any, wantStatus int, out any) {
	e.T.Helper()
	b := e.Do(method, path, body, wantStatus)
	if err := json.Unmarshal(b, out); err != nil {
		e.T.Fatalf("%s %s: decoding %q: %v", method, path, b, err)
	}
}

// WriteFile writes a file under the root, creating its parents.
func (e *Env) WriteFile(rel, content string) {
	e.T.Helper()
	p := e.Root + "/" + rel
	if err := os.MkdirAll(p[:strings.LastIndexByte(p, '/')], 0o755); err != nil {
		e.T.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.T.Fatal(err)
	}
}

// WantError checks a JSON error body.
func WantError(t testing.TB, body []byte, want string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if len(m) != 1 || m["error"] != want {
		t.Fatalf("error body %s, want {\"error\":%q}", body, want)
	}
}

// WantV1Error checks upstream's error shape {"code","message"}.
func WantV1Error(t testing.TB, body []byte, code, msg string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if len(m) != 2 || m["code"] != code || m["message"] != msg {
		t.Fatalf("error body %s, want {\"code\":%q,\"message\":%q}", body, code, msg)
	}
}

// WantAnyError checks an error message in either error shape: {"error"} of
// our own API or {"code","message"} of upstream's /v1/files.
func WantAnyError(t testing.TB, body []byte, msg string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if m["error"] != msg && m["message"] != msg {
		t.Fatalf("error body %s, want message %q", body, msg)
	}
}

// FrameReader decodes NDJSON frames.
type FrameReader struct {
	t  testing.TB
	sc *bufio.Scanner
}

// NewFrameReader reads NDJSON frames from r.
func NewFrameReader(t testing.TB, r io.Reader) *FrameReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	return &FrameReader{t: t, sc: sc}
}

// Next decodes the next frame; false at the end of the stream.
func (fr *FrameReader) Next() (wire.Frame, bool) {
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

// Collect reads frames to the end and returns stdout, stderr and the exit frame.
func (fr *FrameReader) Collect() (stdout, stderr string, exit wire.Frame) {
	fr.t.Helper()
	var out, errb strings.Builder
	for {
		f, ok := fr.Next()
		if !ok {
			fr.t.Fatal("stream ended without an exit frame")
		}
		switch f.Type {
		case wire.FrameStdout:
			out.Write(f.Data)
		case wire.FrameStderr:
			errb.Write(f.Data)
		case wire.FrameExit:
			if _, more := fr.Next(); more {
				fr.t.Fatal("frames after the exit frame")
			}
			return out.String(), errb.String(), f
		default:
			fr.t.Fatalf("unexpected frame %+v", f)
		}
	}
}

// ProcessGone reports whether pid no longer runs (a zombie counts as gone:
// in a container nobody may reap an orphan).
func ProcessGone(pid int) bool {
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

// WaitGone waits (generously) until pid is gone.
func WaitGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ProcessGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Eventually polls cond until it holds or a generous deadline passes.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ParsePID parses a pid printed by a command.
func ParsePID(t testing.TB, s string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || pid <= 0 {
		t.Fatalf("not a pid: %q", s)
	}
	return pid
}

func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}
