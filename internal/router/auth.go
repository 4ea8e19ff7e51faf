package router

import (
	"container/list"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// Auth modes of the proxy port.
const (
	AuthModeNone        = "none"
	AuthModeToken       = "token"
	AuthModeTokenReview = "tokenreview"
)

// ErrUnauthenticated means the caller's bearer token was missing or not accepted (401). Any other
// error from an Authenticator means it could not decide (503): the router fails closed.
var ErrUnauthenticated = errors.New("unauthenticated")

// Authenticator decides whether a bearer token ("" when none was sent) may use the router.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) error
}

// requireAuth answers 401/503 unless a accepts the request's bearer token. A nil a lets every
// request through (--auth-mode none).
func requireAuth(a Authenticator, m *Metrics, log *slog.Logger, next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header)
		if !ok {
			m.authDecision("denied")
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox-router"`)
			writeDetail(w, http.StatusUnauthorized, "Missing or malformed bearer token.")
			return
		}
		err := a.Authenticate(r.Context(), token)
		switch {
		case err == nil:
			m.authDecision("allowed")
			next.ServeHTTP(w, r)
		case errors.Is(err, ErrUnauthenticated):
			m.authDecision("denied")
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox-router", error="invalid_token"`)
			writeDetail(w, http.StatusUnauthorized, "Invalid bearer token.")
		default:
			// The error never contains the token: reviewers below do not put it there.
			m.authDecision("error")
			log.Error("authentication unavailable", "err", err)
			writeDetail(w, http.StatusServiceUnavailable, "Authentication is temporarily unavailable.")
		}
	})
}

// bearerToken returns the token of a single "Authorization: Bearer <token>" header.
func bearerToken(h http.Header) (string, bool) {
	vs := h["Authorization"]
	if len(vs) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
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

func (s *staticToken) Authenticate(_ context.Context, token string) error {
	got := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(got[:], s.sum[:]) != 1 {
		return ErrUnauthenticated
	}
	return nil
}

// TokenReviewer asks an authority whether a token is valid; KubeTokenReviewer asks the API server.
type TokenReviewer interface {
	Review(ctx context.Context, token string) (authenticated bool, err error)
}

// KubeTokenReviewer reviews tokens with the TokenReview API (the router's service account needs
// create on tokenreviews, e.g. through system:auth-delegator).
type KubeTokenReviewer struct {
	Client    authnv1client.TokenReviewInterface
	Audiences []string
}

func (k *KubeTokenReviewer) Review(ctx context.Context, token string) (bool, error) {
	res, err := k.Client.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: k.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("TokenReview: %w", err)
	}
	if !res.Status.Authenticated {
		return false, nil
	}
	// The API server already checks audiences; checking again keeps a misconfigured
	// authenticator from widening access.
	if len(k.Audiences) > 0 && !intersects(res.Status.Audiences, k.Audiences) {
		return false, nil
	}
	return true, nil
}

func intersects(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// reviewTimeout bounds one TokenReview call; it is detached from the caller's context so that
// one impatient client does not fail the callers sharing its in-flight review.
const reviewTimeout = 10 * time.Second

// cachedReviewer remembers review outcomes (valid and invalid) by sha256(token) for ttl in a
// bounded LRU, and collapses concurrent reviews of one token into one API call. Errors are not
// cached. A revoked token stays accepted for at most ttl.
type cachedReviewer struct {
	reviewer TokenReviewer
	ttl      time.Duration
	max      int
	now      func() time.Time

	mu    sync.Mutex
	lru   *list.List // front = most recently used; values are *reviewEntry
	items map[[sha256.Size]byte]*list.Element

	flight singleflight.Group
}

type reviewEntry struct {
	key     [sha256.Size]byte
	ok      bool
	expires time.Time
}

// NewTokenReviewAuthenticator wraps r with a result cache of at most size entries kept for ttl.
func NewTokenReviewAuthenticator(r TokenReviewer, ttl time.Duration, size int) Authenticator {
	if size < 1 {
		size = 1
	}
	return &cachedReviewer{reviewer: r, ttl: ttl, max: size, now: time.Now,
		lru: list.New(), items: make(map[[sha256.Size]byte]*list.Element)}
}

func (c *cachedReviewer) Authenticate(ctx context.Context, token string) error {
	if token == "" {
		return ErrUnauthenticated
	}
	key := sha256.Sum256([]byte(token))
	if ok, hit := c.lookup(key); hit {
		return verdict(ok)
	}
	v, err, _ := c.flight.Do(string(key[:]), func() (interface{}, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		ok, err := c.reviewer.Review(rctx, token)
		if err != nil {
			return false, err
		}
		c.store(key, ok)
		return ok, nil
	})
	if err != nil {
		return err
	}
	return verdict(v.(bool))
}

func verdict(ok bool) error {
	if ok {
		return nil
	}
	return ErrUnauthenticated
}

func (c *cachedReviewer) lookup(key [sha256.Size]byte) (ok, hit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, found := c.items[key]
	if !found {
		return false, false
	}
	e := el.Value.(*reviewEntry)
	if !c.now().Before(e.expires) {
		c.lru.Remove(el)
		delete(c.items, key)
		return false, false
	}
	c.lru.MoveToFront(el)
	return e.ok, true
}

func (c *cachedReviewer) store(key [sha256.Size]byte, ok bool) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &reviewEntry{key: key, ok: ok, expires: c.now().Add(c.ttl)}
	if el, found := c.items[key]; found {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.items[key] = c.lru.PushFront(e)
	for c.lru.Len() > c.max {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.items, oldest.Value.(*reviewEntry).key)
	}
}

// len is the number of cached outcomes (tests).
func (c *cachedReviewer) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
