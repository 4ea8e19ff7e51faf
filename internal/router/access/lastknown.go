package access

import (
	"context"
	"errors"
	"net/url"
	"strings"
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
// what was kept for that question), a failed review of a caller it has no answer for still
// fails closed (after retryTransient), and a right revoked during the outage is honoured once
// the API server answers again: at most ttl after the last good answer.
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

// recall returns the last good answer for key, for a review that failed. Any error counts: a
// review's verdict on the caller is its result, never an error, so an error only says the
// question went unanswered — a connection refused or cut, a body cut short ("Please retry"), or
// a kube-apiserver just restarted that refuses the router's own review (401/403) until its
// authenticators and RBAC caches have loaded.
func (l *lastKnown) recall(key any) (any, bool) {
	if l == nil {
		return nil, false
	}
	return l.cache.Get(key)
}

// reviewRetryBudget is how long a review that failed transiently is asked again for a caller
// the router has no last good answer for: long enough for kube-apiserver to come back from a
// restart (seconds), short enough that the caller learns of a real outage.
const reviewRetryBudget = 5 * time.Second

// retryTransient asks again, with a backoff from 100 ms doubling up to 1 s, while ask fails in
// a way apiUnavailable says is passing, for at most budget and while ctx lasts. err is the
// failure of the first attempt.
func retryTransient[T any](ctx context.Context, budget time.Duration, err error, ask func(context.Context) (T, error)) (T, error) {
	var v T
	deadline := time.Now().Add(budget)
	for delay := 100 * time.Millisecond; apiUnavailable(err) && time.Until(deadline) > delay; delay = min(2*delay, time.Second) {
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(delay):
		}
		if v, err = ask(ctx); err == nil {
			return v, nil
		}
	}
	return v, err
}

// apiUnavailable reports whether err means the API server did not answer the question and may
// soon: it was unreachable, restarting, overloaded or timed out. client-go wraps every failure
// on the way in a *url.Error; a body cut short it reports with "Please retry".
func apiUnavailable(err error) bool {
	var ue *url.Error
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ue), utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err),
		utilnet.IsProbableEOF(err), utilnet.IsHTTP2ConnectionLost(err),
		strings.Contains(err.Error(), "unexpected error when reading response body. Please retry."):
		return true
	}
	return apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsUnexpectedServerError(err)
}
