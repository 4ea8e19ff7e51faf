package sandboxd_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
)

// A fresh daemon runs one trivial command through its shell before it listens, so that the
// first command a client sends does not pay for the first run of that path. Clients never
// see it: the daemon is not reachable until it is over, and it is not counted as a command.
func TestRunWarmsUpBeforeListening(t *testing.T) {
	marks := t.TempDir()
	shell := fakeShell(t, `touch "`+marks+`/started"
while [ ! -e "`+marks+`/released" ]; do sleep 0.01; done`)
	addr := freeAddr(t)
	stop := runDaemon(t, sandboxd.Config{Root: t.TempDir(), Listen: addr, Shell: shell})
	defer stop()

	sandboxdtest.Eventually(t, "the warm-up to run the shell", func() bool { return exists(filepath.Join(marks, "started")) })
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the daemon listens while its warm-up runs: want it to listen only after")
	}
	if err := os.WriteFile(filepath.Join(marks, "released"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sandboxdtest.Eventually(t, "the daemon to serve after its warm-up", func() bool { return healthy(addr) })
	if m := get(t, "http://"+addr+"/metrics"); strings.Contains(m, "sandboxd_exec_total{") {
		t.Fatalf("the warm-up was counted as a command; want no sandboxd_exec_total series, got:\n%s", m)
	}
}

// A shell that never returns is cut at the warm-up's bound, and the daemon serves.
func TestRunListensWhenTheWarmUpHangs(t *testing.T) {
	restore := sandboxd.SetWarmUpTimeout(200 * time.Millisecond)
	defer restore()
	marks := t.TempDir()
	shell := fakeShell(t, `touch "`+marks+`/started"
while :; do sleep 0.01; done`)
	addr := freeAddr(t)
	stop := runDaemon(t, sandboxd.Config{Root: t.TempDir(), Listen: addr, Shell: shell})
	defer stop()
	sandboxdtest.Eventually(t, "the daemon to serve after a warm-up that hangs", func() bool { return healthy(addr) })
	if !exists(filepath.Join(marks, "started")) {
		t.Fatal("want the warm-up to have started the shell")
	}
}

// A missing shell leaves nothing to warm up; the daemon serves as before.
func TestRunServesWithoutAShell(t *testing.T) {
	addr := freeAddr(t)
	stop := runDaemon(t, sandboxd.Config{Root: t.TempDir(), Listen: addr, Shell: filepath.Join(t.TempDir(), "no-shell")})
	defer stop()
	sandboxdtest.Eventually(t, "the daemon to serve without a shell", func() bool { return healthy(addr) })
}

// fakeShell writes an executable /bin/sh script with body; the warm-up runs it as "<it> -c :".
func fakeShell(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// freeAddr is a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// runDaemon runs sandboxd.Run with cfg's gRPC and envd ports off; stop ends it and waits.
func runDaemon(t *testing.T, cfg sandboxd.Config) (stop func()) {
	t.Helper()
	cfg.GRPCListen, cfg.EnvdListen = "off", "off"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sandboxd.Run(ctx, cfg) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func healthy(addr string) bool {
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
