package sandboxd

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/execapi"
	processv1 "github.com/agent-sandbox/agent-sandbox/pkg/proto/process/v1"
)

// The bearer token, when the daemon has one, guards every HTTP endpoint
// except the public ones (see buildRoutes) and every gRPC call.

// authorized checks "Authorization: Bearer <token>" on an HTTP request.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	const pfx = "Bearer "
	if len(h) < len(pfx) || !strings.EqualFold(h[:len(pfx)], pfx) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[len(pfx):]), []byte(s.cfg.Token)) == 1
}

// newGRPCServer builds the gRPC server with the ProcessService and, when the
// daemon has a token, an interceptor that requires it.
func (s *Server) newGRPCServer() *grpc.Server {
	unary := []grpc.UnaryServerInterceptor{s.grpcActivityUnary}
	stream := []grpc.StreamServerInterceptor{s.grpcActivityStream}
	if s.tracer != nil {
		unary, stream = append([]grpc.UnaryServerInterceptor{s.grpcTraceUnary}, unary...), append([]grpc.StreamServerInterceptor{s.grpcTraceStream}, stream...)
	}
	if s.cfg.Token != "" {
		unary, stream = append(unary, s.grpcAuthUnary), append(stream, s.grpcAuthStream)
	}
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...)}
	g := grpc.NewServer(opts...)
	processv1.RegisterProcessServiceServer(g, execapi.NewProcessService(s.runner))
	return g
}

func (s *Server) grpcAuthorized(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		const pfx = "bearer "
		if len(v) > len(pfx) && strings.EqualFold(v[:len(pfx)], pfx) &&
			subtle.ConstantTimeCompare([]byte(v[len(pfx):]), []byte(s.cfg.Token)) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "unauthorized: send authorization: Bearer <token>")
}

func (s *Server) grpcAuthUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.grpcAuthorized(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) grpcAuthStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.grpcAuthorized(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

// isGRPC tells a gRPC call (HTTP/2, application/grpc) from the HTTP API on
// the same port.
func isGRPC(proto int, contentType string) bool {
	return proto == 2 && strings.HasPrefix(contentType, "application/grpc")
}
