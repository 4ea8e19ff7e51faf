package envd

import (
	"context"
	"errors"

	"connectrpc.com/connect"
)

// authInterceptor requires the access token on every RPC, answering
// Unauthenticated (which the SDK reports as an authentication error).
type authInterceptor struct{ s *Service }

var errUnauthenticated = connect.NewError(connect.CodeUnauthenticated, errors.New("unauthorized: send the sandbox's access token as X-Access-Token"))

func (a *authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !a.s.hasToken(req.Header()) {
			return nil, errUnauthenticated
		}
		return next(ctx, req)
	}
}

func (a *authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a *authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if !a.s.hasToken(conn.RequestHeader()) {
			return errUnauthenticated
		}
		return next(ctx, conn)
	}
}
