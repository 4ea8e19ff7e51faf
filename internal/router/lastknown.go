package router

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/utils/clock"
)

// lastKnown keeps the router's good answers (an authenticated token's user, an allowed access)
// for longer than their cache does, to be used only while the API server cannot be asked: a
// restart of kube-apiserver or etcd then leaves the sessions that were working working, instead
// of failing every request once the short caches expire. A refusal is never kept (and drops
// what was kept for that question), a failed
// review of a caller it has no answer for still fails closed, and a right revoked during the
// outage is honoured once the API server answers again: at most ttl after the last good answer.
type lastKnown struct {
	ttl   time.Duration
	cache *utilcache.LRUExpireCache
}

func newLastKnown(ttl time.Duration, size int, clk clock.PassiveClock) *lastKnown {
	if ttl <= 0 {
		return nil
	}
	return &lastKnown{ttl: ttl, cache: utilcache.NewLRUExpireCacheWithClock(max(size, 1), clk)}
}

func (l *lastKnown) remember(key, v any) {
	if l != nil {
		l.cache.Add(key, v, l.ttl)
	}
}

// forget drops key's answer: the API server has since refused it.
func (l *lastKnown) forget(key any) {
	if l != nil {
		l.cache.Remove(key)
	}
}

// recall returns the last good answer for key when err says the API server could not answer.
func (l *lastKnown) recall(key any, err error) (any, bool) {
	if l == nil || !apiUnavailable(err) {
		return nil, false
	}
	return l.cache.Get(key)
}

// apiUnavailable reports whether err means the API server did not answer the question: it was
// unreachable, restarting, overloaded or timed out, not that it refused.
func apiUnavailable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.DeadlineExceeded), utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err),
		utilnet.IsProbableEOF(err), utilnet.IsHTTP2ConnectionLost(err):
		return true
	}
	return apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsUnexpectedServerError(err)
}
