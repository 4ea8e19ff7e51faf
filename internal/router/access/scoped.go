package access

import (
	"context"
	"errors"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

// scopedAuthenticator accepts tokens the controller minted for one Sandbox and hands every
// other token to next (nil: refuse them).
type scopedAuthenticator struct {
	signer *scopedtoken.Signer
	next   Authenticator
	now    func() time.Time
}

// NewScopedTokenAuthenticator verifies scoped tokens with signer and passes other tokens on.
func NewScopedTokenAuthenticator(signer *scopedtoken.Signer, next Authenticator) Authenticator {
	return &scopedAuthenticator{signer: signer, next: next, now: time.Now}
}

func (s *scopedAuthenticator) Authenticate(ctx context.Context, token string) (*Identity, error) {
	if !scopedtoken.IsScoped(token) {
		if s.next == nil {
			return nil, ErrUnauthenticated
		}
		return s.next.Authenticate(ctx, token)
	}
	c, err := s.signer.Verify(token, s.now())
	if err != nil {
		// Malformed, forged and expired tokens are all the caller's problem: 401.
		return nil, errors.Join(ErrUnauthenticated, err)
	}
	return &Identity{Scope: &c}, nil
}
