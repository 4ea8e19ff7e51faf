package sandboxd_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	processv1 "github.com/agent-sandbox/agent-sandbox/pkg/proto/process/v1"
)

func shell(cmd string) *processv1.ProcessConfig {
	return &processv1.ProcessConfig{Command: []string{"/bin/sh", "-c", cmd}}
}

func TestGRPCToken(t *testing.T) {
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.Token = "secret" })
	c := sandboxdtest.GRPCOnHTTPPort(t, e)
	req := &processv1.ExecuteRequest{Config: shell("echo ok")}
	if _, err := c.Execute(sandboxdtest.GRPCCtx(t), req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: %v, want Unauthenticated", err)
	}
	ctx := metadata.AppendToOutgoingContext(sandboxdtest.GRPCCtx(t), "authorization", "Bearer secret")
	if resp, err := c.Execute(ctx, req); err != nil || string(resp.GetStdout()) != "ok\n" {
		t.Fatalf("with the token: %v %v, want ok", resp, err)
	}
}

// TestRunServesExtraPorts: Run serves the ProcessService on GRPCListen and the HTTP API on
// RESTListen (upstream sandboxd's ports), and stops both on shutdown.
func TestRunServesExtraPorts(t *testing.T) {
	freePort := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	grpcAddr, restAddr := freePort(), freePort()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sandboxd.Run(ctx, sandboxd.Config{Listen: freePort(), GRPCListen: grpcAddr, RESTListen: restAddr, Root: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ShutdownTimeout: 2 * time.Second})
	}()
	c := sandboxdtest.GRPCClient(t, grpcAddr)
	var resp *processv1.ExecuteResponse
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err = c.Execute(sandboxdtest.GRPCCtx(t), &processv1.ExecuteRequest{Config: shell("echo via-own-port")}); err == nil {
			break
		}
	}
	if err != nil || string(resp.GetStdout()) != "via-own-port\n" {
		t.Fatalf("Execute on %s: %v %v, want via-own-port", grpcAddr, resp, err)
	}
	hresp, err := http.Get("http://" + restAddr + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/health on %s: %d, want 200", restAddr, hresp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v, want nil after shutdown", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after shutdown")
	}
}
