package sandboxd_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

func TestHealthAndMetadata(t *testing.T) {
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.Version = "v1.2.3" })
	if b := e.Do("GET", "/healthz", nil, http.StatusOK); string(b) != `{"status":"ok"}` {
		t.Fatalf("healthz %s", b)
	}
	var md wire.Metadata
	e.DoJSON("GET", "/metadata", nil, http.StatusOK, &md)
	host, _ := os.Hostname()
	if md.Version != "v1.2.3" || md.Root != e.Root || md.PID != os.Getpid() || md.Hostname != host || md.StartTime.IsZero() || len(md.Capabilities) == 0 {
		t.Fatalf("metadata %+v", md)
	}
}

func TestRouting(t *testing.T) {
	e := sandboxdtest.New(t)
	sandboxdtest.WantError(t, e.Do("GET", "/nope", nil, http.StatusNotFound), "not found")
	resp := e.Request(t.Context(), "PATCH", "/v1/exec", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("405: %d %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp = e.Request(t.Context(), "PATCH", "/v1/processes", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "DELETE, GET, POST" {
		t.Fatalf("405: %d %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestAuth(t *testing.T) {
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.Token = "s3cret" })
	tests := []struct {
		method, path, auth string
		status             int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/", "", 200},
		{"GET", "/metadata", "", 401},
		{"GET", "/metrics", "", 401},
		{"GET", "/v1/list/", "", 401},
		{"GET", "/v1/list/", "Bearer wrong", 401},
		{"GET", "/v1/list/", "s3cret", 401},
		{"GET", "/v1/list/", "Basic s3cret", 401},
		{"POST", "/execute", "", 401},
		{"GET", "/exists/x", "", 401},
		{"GET", "/v1/list/", "Bearer s3cret", 200},
		{"GET", "/v1/list/", "bearer s3cret", 200},
		{"GET", "/metadata", "Bearer s3cret", 200},
		{"GET", "/metrics", "Bearer s3cret", 200},
	}
	for _, tc := range tests {
		var hdr []string
		if tc.auth != "" {
			hdr = []string{"Authorization", tc.auth}
		}
		b := e.Do(tc.method, tc.path, nil, tc.status, hdr...)
		if tc.status == 401 {
			sandboxdtest.WantError(t, b, "unauthorized")
		}
	}
	// Commands never see the token.
	t.Setenv("SANDBOXD_TOKEN", "s3cret")
	var res wire.ExecResult
	b := e.Do("POST", "/v1/exec", wire.ExecRequest{Command: `echo "[$SANDBOXD_TOKEN]"`}, 200, "Authorization", "Bearer s3cret")
	if !strings.Contains(string(b), `"stdout":"[]\n"`) {
		t.Fatalf("token leaked: %s %+v", b, res)
	}
}

func TestAuthOffByDefault(t *testing.T) {
	e := sandboxdtest.New(t)
	e.Do("GET", "/metadata", nil, http.StatusOK)
	e.Do("GET", "/v1/list/", nil, http.StatusOK)
}

func h2cClient() (*http.Client, *http.Transport) {
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true) // h2c only: prior knowledge, no upgrade
	tr := &http.Transport{Protocols: &protos}
	return &http.Client{Transport: tr}, tr
}

func TestH2C(t *testing.T) {
	e := sandboxdtest.New(t)
	client, tr := h2cClient()
	defer tr.CloseIdleConnections()

	resp, err := client.Get(e.TS.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || string(b) != `{"status":"ok"}` {
		t.Fatalf("proto %s body %s", resp.Proto, b)
	}

	// Streaming works over HTTP/2 too.
	req, _ := http.NewRequest("POST", e.TS.URL+"/v1/exec", strings.NewReader(`{"command":"echo a; echo b >&2"}`))
	req.Header.Set("Accept", wire.ContentTypeNDJSON)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	stdout, stderr, exit := sandboxdtest.NewFrameReader(t, resp.Body).Collect()
	if resp.ProtoMajor != 2 || stdout != "a\n" || stderr != "b\n" || exit.ExitCode != 0 {
		t.Fatalf("proto %s stdout %q stderr %q exit %+v", resp.Proto, stdout, stderr, exit)
	}
}

func TestMetrics(t *testing.T) {
	e := sandboxdtest.New(t)
	e.Do("GET", "/healthz", nil, http.StatusOK)
	e.Do("POST", "/v1/exec", wire.ExecRequest{Argv: []string{"true"}}, http.StatusOK)
	e.Do("GET", "/v1/files/nope", nil, http.StatusNotFound)
	b := string(e.Do("GET", "/metrics", nil, http.StatusOK))
	for _, want := range []string{
		`sandboxd_http_requests_total{code="200",method="GET",route="/healthz"} 1`,
		`sandboxd_http_requests_total{code="404",method="GET",route="/v1/files/{path}"} 1`,
		`sandboxd_exec_total{mode="buffered",outcome="ok"} 1`,
		`sandboxd_exec_duration_seconds_count{mode="buffered"} 1`,
		`sandboxd_background_processes_running 0`,
	} {
		if !strings.Contains(b, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestServeGracefulShutdown(t *testing.T) {
	s, err := sandboxd.New(sandboxd.Config{
		Root:            t.TempDir(),
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		ShutdownTimeout: 300 * time.Millisecond,
		KillGrace:       200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	// A streamed command that would run for minutes.
	req, _ := http.NewRequest("POST", url+"/v1/exec", strings.NewReader(`{"command":"echo started; sleep 300"}`))
	req.Header.Set("Accept", wire.ContentTypeNDJSON)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	fr := sandboxdtest.NewFrameReader(t, resp.Body)
	if f, ok := fr.Next(); !ok || string(f.Data) != "started\n" {
		t.Fatalf("first frame %+v", f)
	}
	stop()
	// After the shutdown timeout the command is killed and the stream ends
	// with its exit frame.
	_, _, exit := fr.Collect()
	if exit.ExitCode != 128+15 {
		t.Fatalf("exit %+v", exit)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := client.Get(url + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

func TestRunRejectsBadListen(t *testing.T) {
	err := sandboxd.Run(context.Background(), sandboxd.Config{Root: t.TempDir(), Listen: "256.0.0.1:bad", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		t.Fatal("want an error")
	}
}
