package access

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/singleflight"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/utils/clock"
)

// TokenReviewer asks an authority who a token belongs to: nil when it belongs to no one.
type TokenReviewer interface {
	Review(ctx context.Context, token string) (*authnv1.UserInfo, error)
}

// KubeTokenReviewer reviews tokens with the TokenReview API (the router's service account needs
// create on tokenreviews, e.g. through system:auth-delegator).
type KubeTokenReviewer struct {
	Client    authnv1client.TokenReviewInterface
	Audiences []string
}

func (k *KubeTokenReviewer) Review(ctx context.Context, token string) (*authnv1.UserInfo, error) {
	res, err := k.Client.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: k.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("TokenReview: %w", err)
	}
	if !res.Status.Authenticated {
		return nil, nil
	}
	// The API server already checks audiences; checking again keeps a misconfigured
	// authenticator from widening access.
	if len(k.Audiences) > 0 && !slices.ContainsFunc(res.Status.Audiences, func(a string) bool { return slices.Contains(k.Audiences, a) }) {
		return nil, nil
	}
	user := res.Status.User
	return &user, nil
}

// reviewTimeout bounds one review call; it is detached from the caller's context so that one
// impatient client does not fail the callers sharing its in-flight review.
const reviewTimeout = 10 * time.Second

// cachedReviewer remembers review outcomes (users and refusals) by sha256(token) for ttl in a
// bounded LRU, and collapses concurrent reviews of one token into one API call. Errors are not
// cached. A revoked token stays accepted for at most ttl.
type cachedReviewer struct {
	reviewer  TokenReviewer
	ttl       time.Duration
	cache     *utilcache.LRUExpireCache
	lastUsers *lastKnown // authenticated users, kept for when the API server cannot answer
	// retryBudget bounds retryTransient for a token without a last known user.
	retryBudget time.Duration
	flight      singleflight.Group
	refresh     *refreshAhead // users of tokens in use are asked again before they expire
}

// NewTokenReviewAuthenticator wraps r with a result cache of at most size entries kept for ttl.
// A token's user is also kept for lastKnownTTL, and used while the API server cannot answer (0:
// never).
func NewTokenReviewAuthenticator(r TokenReviewer, ttl, lastKnownTTL time.Duration, size int) Authenticator {
	return newCachedReviewer(r, ttl, lastKnownTTL, size, clock.RealClock{})
}

func newCachedReviewer(r TokenReviewer, ttl, lastKnownTTL time.Duration, size int, clk clock.PassiveClock) *cachedReviewer {
	return &cachedReviewer{reviewer: r, ttl: ttl, cache: utilcache.NewLRUExpireCacheWithClock(max(size, 1), clk),
		lastUsers: newLastKnown(lastKnownTTL, size, clk), retryBudget: reviewRetryBudget, refresh: newRefreshAhead(clk, ttl)}
}

func (c *cachedReviewer) Authenticate(ctx context.Context, token string) (*Identity, error) {
	if token == "" {
		return nil, ErrUnauthenticated
	}
	key := sha256.Sum256([]byte(token))
	if v, hit := c.cache.Get(key); hit {
		ans := v.(answered)
		user := ans.v.(*authnv1.UserInfo)
		if user != nil && c.refresh.due(ans) {
			c.refresh.start(key, func() { _, _ = c.review(context.Background(), token, key) })
		}
		return identityOf(user)
	}
	user, err := c.review(ctx, token, key)
	if err != nil {
		return nil, err
	}
	return identityOf(user)
}

// review asks who token (key) is, once at a time per token, and remembers the answer; while
// the API server cannot answer, the token's last known user stands.
func (c *cachedReviewer) review(ctx context.Context, token string, key [sha256.Size]byte) (*authnv1.UserInfo, error) {
	v, err, _ := c.flight.Do(string(key[:]), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		ask := func(ctx context.Context) (*authnv1.UserInfo, error) { return c.reviewer.Review(ctx, token) }
		user, err := ask(rctx)
		if err != nil {
			if v, ok := c.lastUsers.recall(key); ok {
				return v, nil
			}
			if user, err = retryTransient(rctx, c.retryBudget, err, ask); err != nil {
				return nil, err
			}
		}
		if user != nil {
			c.lastUsers.remember(key, user)
		} else {
			c.lastUsers.forget(key)
		}
		if c.ttl > 0 {
			c.cache.Add(key, c.refresh.stamp(user), c.ttl)
		}
		return user, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*authnv1.UserInfo), nil
}

func identityOf(user *authnv1.UserInfo) (*Identity, error) {
	if user == nil {
		return nil, ErrUnauthenticated
	}
	return &Identity{User: *user}, nil
}

// len is the number of cached outcomes (tests).
func (c *cachedReviewer) len() int { return len(c.cache.Keys()) }
