package access

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sort"
	"time"

	"golang.org/x/sync/singleflight"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
)

// The permission a caller needs to reach a sandbox through the router: create on the
// sandboxes/proxy subresource of that Sandbox, in its namespace. Reading a Sandbox (get on
// sandboxes) is not enough: running code in it is a different right, as pods/exec is for pods.
const (
	ProxyGroup       = "agents.x-k8s.io"
	ProxyResource    = "sandboxes"
	ProxySubresource = "proxy"
	ProxyVerb        = "create"
)

// Authorizer decides whether id may reach the Sandbox namespace/name a request is routed to.
type Authorizer interface {
	Authorize(ctx context.Context, id *Identity, namespace, name string) (bool, error)
}

// SandboxReviewer asks an authority whether user may reach the Sandbox namespace/name.
type SandboxReviewer interface {
	Review(ctx context.Context, user authnv1.UserInfo, namespace, name string) (bool, error)
}

// KubeSandboxReviewer asks the API server with a SubjectAccessReview (the router's service
// account needs create on subjectaccessreviews, e.g. through system:auth-delegator).
type KubeSandboxReviewer struct {
	Client authzv1client.SubjectAccessReviewInterface
}

func (k *KubeSandboxReviewer) Review(ctx context.Context, user authnv1.UserInfo, namespace, name string) (bool, error) {
	return subjectAccessReview(ctx, k.Client, user, authzv1.ResourceAttributes{
		Namespace: namespace, Name: name, Verb: ProxyVerb,
		Group: ProxyGroup, Resource: ProxyResource, Subresource: ProxySubresource,
	})
}

// sandboxAuthorizer lets the shared token everywhere and a scoped token into its one Sandbox,
// and asks reviewer about everyone else, remembering answers briefly (allowed for allowTTL,
// denied for denyTTL, so a new RoleBinding takes effect quickly).
type sandboxAuthorizer struct {
	reviewer          SandboxReviewer
	allowTTL, denyTTL time.Duration
	cache             *utilcache.LRUExpireCache
	lastAllowed       *lastKnown // allowances, kept for when the API server cannot answer
	retryBudget       time.Duration
	flight            singleflight.Group
	refresh           *refreshAhead // allows in use are asked again before they expire
	// namespaceWide: ask first whether the caller may reach every Sandbox of the namespace
	// (AskNamespaceWideFirst).
	namespaceWide bool
}

// AuthorizerOption changes how a sandbox authorizer asks.
type AuthorizerOption func(*sandboxAuthorizer)

// AskNamespaceWideFirst makes the authorizer ask, on a question it has no answer for, whether
// the caller may reach every Sandbox of the namespace (a review with no name: under RBAC, a
// rule without resourceNames), and remember that answer for the namespace. A caller allowed
// there then reaches each new Sandbox of the namespace with no review of its own: the first
// command to a freshly claimed sandbox waits for no API round trip. Only an allow is taken
// from it; a caller allowed on some names only is asked about each as before (one review more
// per deny TTL), and a namespace-wide review that fails is not asked again for the deny TTL.
func AskNamespaceWideFirst() AuthorizerOption {
	return func(a *sandboxAuthorizer) { a.namespaceWide = true }
}

// NewSandboxAuthorizer returns the router's Authorizer; a nil reviewer allows every Kubernetes
// identity everywhere (authentication only). An allowance is also kept for lastKnownTTL, and used
// while the API server cannot answer (0: never).
func NewSandboxAuthorizer(reviewer SandboxReviewer, allowTTL, denyTTL, lastKnownTTL time.Duration, size int, opts ...AuthorizerOption) Authorizer {
	a := newSandboxAuthorizer(reviewer, allowTTL, denyTTL, lastKnownTTL, size, clock.RealClock{})
	for _, o := range opts {
		o(a)
	}
	return a
}

func newSandboxAuthorizer(reviewer SandboxReviewer, allowTTL, denyTTL, lastKnownTTL time.Duration, size int, clk clock.PassiveClock) *sandboxAuthorizer {
	return &sandboxAuthorizer{reviewer: reviewer, allowTTL: allowTTL, denyTTL: denyTTL,
		cache: utilcache.NewLRUExpireCacheWithClock(max(size, 1), clk), lastAllowed: newLastKnown(lastKnownTTL, size, clk),
		retryBudget: reviewRetryBudget, refresh: newRefreshAhead(clk, allowTTL)}
}

func (a *sandboxAuthorizer) Authorize(ctx context.Context, id *Identity, namespace, name string) (bool, error) {
	switch {
	case id.Shared:
		return true, nil
	case id.Scope != nil:
		return id.Scope.Namespace == namespace && id.Scope.Name == name, nil
	case a.reviewer == nil:
		return true, nil
	}
	key := accessKey(id.User, namespace, name)
	if allowed, hit, stale := a.cached(key); hit {
		if stale {
			a.refresh.start(key, func() { _, _ = a.review(context.Background(), id, key, namespace, name) })
		}
		return allowed, nil
	}
	if a.namespaceWide && a.allowedNamespaceWide(ctx, id, namespace) {
		return true, nil
	}
	return a.review(ctx, id, key, namespace, name)
}

// allowedNamespaceWide says whether id may reach every Sandbox of namespace, from the cache or
// one review without retries; an error counts as no.
func (a *sandboxAuthorizer) allowedNamespaceWide(ctx context.Context, id *Identity, namespace string) bool {
	key := accessKey(id.User, namespace, "")
	if allowed, hit, stale := a.cached(key); hit {
		if stale {
			a.refresh.start(key, func() { a.reviewNamespaceWide(context.Background(), id, key, namespace) })
		}
		return allowed
	}
	return a.reviewNamespaceWide(ctx, id, key, namespace)
}

// cached is the remembered answer to key, if any; stale: it is an allow old enough to be asked
// again in the background.
func (a *sandboxAuthorizer) cached(key [sha256.Size]byte) (allowed, hit, stale bool) {
	v, hit := a.cache.Get(key)
	if !hit {
		return false, false, false
	}
	ans := v.(answered)
	allowed = ans.v.(bool)
	return allowed, true, allowed && a.refresh.due(ans)
}

// reviewNamespaceWide asks once, without retries, whether id may reach every Sandbox of
// namespace (key), and remembers the answer; an error counts as no.
func (a *sandboxAuthorizer) reviewNamespaceWide(ctx context.Context, id *Identity, key [sha256.Size]byte, namespace string) bool {
	v, err, _ := a.flight.Do(string(key[:]), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		allowed, err := a.reviewer.Review(rctx, id.User, namespace, "")
		if err != nil {
			// Unanswered: a recent namespace-wide allow stands, as a Sandbox's own does (the
			// Sandboxes it covered were never asked about one by one, so they have none).
			if v, ok := a.lastAllowed.recall(key); ok {
				return v, nil
			}
		}
		ttl := a.denyTTL
		switch {
		case err == nil && allowed:
			ttl = a.allowTTL
			a.lastAllowed.remember(key, true)
		case err == nil:
			a.lastAllowed.forget(key)
		}
		if ttl > 0 {
			a.cache.Add(key, a.refresh.stamp(err == nil && allowed), ttl)
		}
		return err == nil && allowed, nil
	})
	return err == nil && v.(bool)
}

// review asks whether id may reach namespace/name (key), once at a time per question, and
// remembers the answer; while the API server cannot answer, a recent allow stands.
func (a *sandboxAuthorizer) review(ctx context.Context, id *Identity, key [sha256.Size]byte, namespace, name string) (bool, error) {
	v, err, _ := a.flight.Do(string(key[:]), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		ask := func(ctx context.Context) (bool, error) {
			return a.reviewer.Review(ctx, id.User, namespace, name)
		}
		allowed, err := ask(rctx)
		if err != nil {
			if v, ok := a.lastAllowed.recall(key); ok {
				return v, nil
			}
			if allowed, err = retryTransient(rctx, a.retryBudget, err, ask); err != nil {
				return false, err
			}
		}
		ttl := a.denyTTL
		if allowed {
			ttl = a.allowTTL
			a.lastAllowed.remember(key, true)
		} else {
			a.lastAllowed.forget(key)
		}
		if ttl > 0 {
			a.cache.Add(key, a.refresh.stamp(allowed), ttl)
		}
		return allowed, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

// accessKey identifies one (user, sandbox) question; every part of the identity that RBAC can
// look at is in it, in a fixed order.
func accessKey(u authnv1.UserInfo, namespace, name string) [sha256.Size]byte {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field(u.Username)
	field(u.UID)
	groups := slices.Clone(u.Groups)
	sort.Strings(groups)
	for _, g := range groups {
		field("g=" + g)
	}
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field("x=" + k)
		for _, v := range u.Extra[k] {
			field(v)
		}
	}
	field(namespace)
	field(name)
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}
