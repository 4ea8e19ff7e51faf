package access

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

// ErrUnauthenticated means the caller's bearer token was not accepted (401). Any other error
// from an Authenticator or Authorizer means it could not decide (503): the router fails closed.
var ErrUnauthenticated = errors.New("unauthenticated")

// Identity is who a request comes from, as authentication established it.
type Identity struct {
	// User is the Kubernetes user a token (or the calling pod's ServiceAccount) belongs to.
	User authnv1.UserInfo
	// Shared: the installation's one shared token (--auth-mode token), trusted with every sandbox.
	Shared bool
	// Scope, when set, is the one Sandbox a scoped token opens.
	Scope *scopedtoken.Claims
	// Pod, when set, is the namespace/name of the pod a tokenless request came from; User is
	// then that pod's ServiceAccount.
	Pod string
}

// Authenticator tells who a bearer token belongs to.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*Identity, error)
}

// staticToken accepts one shared secret. Both sides are hashed first so that the comparison is
// constant-time regardless of the presented token's length.
type staticToken struct{ sum [sha256.Size]byte }

// NewStaticTokenAuthenticator accepts exactly token, which must not be empty.
func NewStaticTokenAuthenticator(token string) (Authenticator, error) {
	if token == "" {
		return nil, errors.New("auth mode token needs a non-empty token")
	}
	return &staticToken{sum: sha256.Sum256([]byte(token))}, nil
}

func (s *staticToken) Authenticate(_ context.Context, token string) (*Identity, error) {
	got := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(got[:], s.sum[:]) != 1 {
		return nil, ErrUnauthenticated
	}
	return &Identity{Shared: true}, nil
}
