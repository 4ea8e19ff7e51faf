package sandboxdtest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	processv1 "github.com/agent-sandbox/agent-sandbox/pkg/proto/process/v1"
)

// GRPCClient dials target (host:port) the way upstream's Go SDK does:
// grpc.NewClient with insecure credentials, i.e. h2c.
func GRPCClient(t testing.TB, target string) processv1.ProcessServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return processv1.NewProcessServiceClient(conn)
}

// GRPCOnHTTPPort is the ProcessService on the HTTP port (what the router reaches).
func GRPCOnHTTPPort(t testing.TB, e *Env) processv1.ProcessServiceClient {
	return GRPCClient(t, strings.TrimPrefix(e.TS.URL, "http://"))
}

// GRPCOnOwnPort serves the ProcessService on a listener of its own, as Run
// does on --grpc-listen.
func GRPCOnOwnPort(t testing.TB, e *Env) processv1.ProcessServiceClient {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = e.Srv.ServeGRPC(ln); close(done) }()
	t.Cleanup(func() { _ = e.Srv.Close(); <-done }) // Close stops the gRPC server
	return GRPCClient(t, ln.Addr().String())
}

// GRPCCtx is a context for one test's calls, cancelled at its end.
func GRPCCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
