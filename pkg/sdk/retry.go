package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// ---- sandboxd and router calls ----

// lostRetryDelays pace the resending of an idempotent request whose
// connection broke before its answer (a router replica or the sandbox's pod
// went away): two more attempts, each of which redials a router that
// refuses connections as any request does.
var lostRetryDelays = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}

// idempotent reports whether r may be sent again after its connection broke
// before the answer: a read without a body changes nothing in the sandbox.
// Anything else (exec, start, signal, kill, write, remove, mkdir, a tar
// upload) may have taken effect. A stream (watch, followed logs) that fails
// in do has delivered nothing yet; once do returned, nothing is resent.
func (r *request) idempotent() bool {
	return (r.method == http.MethodGet || r.method == http.MethodHead) && r.body == nil
}

// retryLost waits before the n-th (from 0) resending of an idempotent
// request whose connection was lost and reports whether to resend it. The
// idle connections are dropped first: they may lead to the same dead peer,
// and the retry must dial afresh.
func (t *httpTransport) retryLost(ctx context.Context, r *request, n int) bool {
	if !r.idempotent() || n >= len(lostRetryDelays) {
		return false
	}
	t.c.http.closeIdle()
	t.c.http.api.CloseIdleConnections() // a custom Options.HTTPTransport's
	return sleepCtx(ctx, lostRetryDelays[n])
}

// ---- Kubernetes API calls ----

// apiRetryBudget bounds how long one Kubernetes API call is retried while
// the API server is away: a kube-apiserver restart or an etcd leader
// election takes seconds; a longer outage is reported, not hidden.
const apiRetryBudget = 30 * time.Second

// The backoff between attempts: apiRetryFirst, doubling up to apiRetryMax.
const (
	apiRetryFirst = 100 * time.Millisecond
	apiRetryMax   = 2 * time.Second
)

// retryableAPIError reports whether a Kubernetes API call that failed with
// err may be sent again. Any call may when the connection was refused: the
// request never reached the server. A write (create, update, patch, delete)
// may not otherwise: after a reset, an EOF or a timeout it may have been
// applied. A read may after any sign that the server or etcd behind it is
// briefly unavailable.
func retryableAPIError(err error, write bool) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	if write {
		return false
	}
	return isTransportError(err) || isBodyCut(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || isEtcdTransient(err) ||
		isConversionConnectionLost(err)
}

// isConversionConnectionLost: the API server's 500 for a conversion webhook call that lost its
// connection, as when the webhook process holding it was killed (kube-apiserver never retries a
// conversion; docs/availability.md). The read did not happen; the webhook's other processes
// answer the next one.
func isConversionConnectionLost(err error) bool {
	if !apierrors.IsInternalError(err) {
		return false
	}
	msg := err.Error()
	if !strings.Contains(msg, "conversion webhook for") {
		return false
	}
	for _, lost := range []string{"broken pipe", "connection reset by peer", "connection refused", "EOF", "http2: client connection lost"} {
		if strings.Contains(msg, lost) {
			return true
		}
	}
	return false
}

// isTransportError: the request failed on its way (client-go wraps every such failure in a
// *url.Error: a reset, an EOF, a lost HTTP/2 connection, a TLS handshake or dial timing out while
// kube-apiserver starts); it got no answer from the server, so a read may go again.
func isTransportError(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)
}

// isBodyCut: client-go lost the connection while it read the answer's body (seen when
// kube-apiserver is killed mid-answer: "http2: client connection force closed via
// ClientConn.Close"); its own message asks for a retry.
func isBodyCut(err error) bool {
	return strings.Contains(err.Error(), "unexpected error when reading response body. Please retry.")
}

// isEtcdTransient: the API server's 500 for an etcd that is electing a
// leader or did not answer in time; the read did not happen.
func isEtcdTransient(err error) bool {
	if !apierrors.IsInternalError(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "etcdserver: request timed out") || strings.Contains(msg, "etcdserver: leader changed")
}

// apiBackoff paces the attempts of a Kubernetes call: apiRetryFirst,
// doubling up to apiRetryMax.
type apiBackoff struct{ next time.Duration }

// wait sleeps for the next delay; false when ctx ends first or the delay
// would end past deadline (none when zero).
func (b *apiBackoff) wait(ctx context.Context, deadline time.Time) bool {
	d := b.next
	if d == 0 {
		d = apiRetryFirst
	}
	b.next = min(2*d, apiRetryMax)
	if !deadline.IsZero() && time.Until(deadline) < d {
		return false
	}
	return sleepCtx(ctx, d)
}

// retryAPI runs call until it succeeds, fails in a way retryableAPIError
// does not retry, apiRetryBudget is spent or ctx ends. A retryable error it
// gives up on is returned wrapped with how long it tried.
func retryAPI(ctx context.Context, write bool, call func() error) error {
	start := time.Now()
	var b apiBackoff
	for attempt := 1; ; attempt++ {
		err := call()
		if !retryableAPIError(err, write) {
			return err
		}
		if !b.wait(ctx, start.Add(apiRetryBudget)) {
			return fmt.Errorf("%w (the Kubernetes API failed %d times in %s)", err, attempt, time.Since(start).Round(time.Millisecond))
		}
	}
}

// withAPIRetries wraps c so that reads and writes are retried as
// retryableAPIError allows. Watches are not: the SDK's waits resume them.
func withAPIRetries(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return retryAPI(ctx, false, func() error { return c.Get(ctx, key, obj, opts...) })
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return retryAPI(ctx, false, func() error { return c.List(ctx, list, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return retryAPI(ctx, true, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return retryAPI(ctx, true, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return retryAPI(ctx, true, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return retryAPI(ctx, true, func() error { return c.Apply(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return retryAPI(ctx, true, func() error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return retryAPI(ctx, true, func() error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		SubResourceGet: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceGetOption) error {
			return retryAPI(ctx, false, func() error { return c.SubResource(sub).Get(ctx, obj, subObj, opts...) })
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return retryAPI(ctx, true, func() error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return retryAPI(ctx, true, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return retryAPI(ctx, true, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
	})
}
