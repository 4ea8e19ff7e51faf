package sdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// cutFront stands for a router replica killed with requests in flight: it takes the request
// of each of the first cuts connections (every one when cuts < 0) and drops the connection
// before answering; later connections are forwarded to target, and cut both ways as soon as the
// answer carries cutAt (when set: killed mid-stream). It counts the requests that reached it.
type cutFront struct {
	url      string
	requests atomic.Int32
}

func newCutFront(t *testing.T, target string, cuts int, cutAt string) *cutFront {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &cutFront{url: "http://" + l.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		open = append(open, c)
	}
	wg.Go(func() {
		for n := 0; ; n++ {
			down, err := l.Accept()
			if err != nil {
				return
			}
			track(down)
			if cuts < 0 || n < cuts {
				wg.Go(func() { f.takeAndDrop(down) })
				continue
			}
			up, err := net.Dial("tcp", u.Host)
			if err != nil {
				_ = down.Close()
				continue
			}
			track(up)
			f.requests.Add(1)
			stop := sync.OnceFunc(func() { _ = down.Close(); _ = up.Close() })
			wg.Go(func() { _, _ = io.Copy(up, down); stop() })
			wg.Go(func() { copyUntil(down, up, cutAt); stop() })
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return f
}

// copyUntil copies src to dst until src ends or, when marker is set, what went through
// contains it.
func copyUntil(dst io.Writer, src io.Reader, marker string) {
	if marker == "" {
		_, _ = io.Copy(dst, src)
		return
	}
	var seen []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			_, _ = dst.Write(buf[:n])
			if seen = append(seen, buf[:n]...); bytes.Contains(seen, []byte(marker)) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// takeAndDrop reads what the client sends until it pauses (the whole request went out), then
// closes the connection without a word.
func (f *cutFront) takeAndDrop(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	got := 0
	for {
		_ = c.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
		n, err := c.Read(buf)
		got += n
		if err != nil {
			break
		}
	}
	if got > 0 {
		f.requests.Add(1)
	}
}

// A read whose connection breaks before the answer (a router replica killed, a pod gone) is
// sent again, at most twice, on a new connection; a call that may have taken effect is sent
// once and reported as ErrConnectionLost.
func TestIdempotentReadsAreResentAfterALostConnection(t *testing.T) {
	readFile := func(ctx context.Context, sb *Sandbox) error {
		b, err := sb.Files().Read(ctx, "f.txt")
		if err == nil && string(b) != "content" {
			return fmt.Errorf("read %q, want %q", b, "content")
		}
		return err
	}
	cases := []struct {
		name         string
		cuts         int // connections dropped before one is forwarded; -1: all
		http1        bool
		call         func(context.Context, *Sandbox) error
		wantLost     bool
		wantRequests int32
		wantOp       string
	}{
		{name: "a file read cut twice is answered on the third attempt", cuts: 2, call: readFile, wantRequests: 3},
		{name: "a file read cut twice over HTTP/1.1 is answered on the third attempt", cuts: 2, http1: true, call: readFile, wantRequests: 3},
		{name: "a process list cut once is answered on the second attempt", cuts: 1, wantRequests: 2,
			call: func(ctx context.Context, sb *Sandbox) error { _, err := sb.Processes(ctx); return err }},
		{name: "a file read cut every time is ErrConnectionLost after three attempts", cuts: -1, call: readFile,
			wantLost: true, wantRequests: 3, wantOp: "GET /v1/files/f.txt"},
		{name: "a command cut is ErrConnectionLost, sent once", cuts: -1, wantLost: true, wantRequests: 1, wantOp: "POST /v1/exec",
			call: func(ctx context.Context, sb *Sandbox) error { _, err := sb.Run(ctx, Shell("echo once")); return err }},
		{name: "a file write cut is ErrConnectionLost, sent once", cuts: -1, wantLost: true, wantRequests: 1, wantOp: "PUT /v1/files/g.txt",
			call: func(ctx context.Context, sb *Sandbox) error { return sb.Files().Write(ctx, "g.txt", []byte("x"), 0) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var front *cutFront
			p := newPlane(t, ModeRouter, func(o *Options) {
				front = newCutFront(t, o.RouterURL, tc.cuts, "")
				o.RouterURL, o.DisableHTTP2 = front.url, tc.http1
			})
			if err := os.WriteFile(filepath.Join(p.d.Root, "f.txt"), []byte("content"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := tc.call(testCtx(t), p.sb)
			switch {
			case tc.wantLost && (!errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), tc.wantOp)):
				t.Fatalf("call = %v, want ErrConnectionLost naming %s", err, tc.wantOp)
			case !tc.wantLost && err != nil:
				t.Fatalf("call = %v, want it answered after the cuts", err)
			}
			if got := front.requests.Load(); got != tc.wantRequests {
				t.Fatalf("the router saw %d requests, want %d", got, tc.wantRequests)
			}
		})
	}
}

// Errors as client-go reports them.
var (
	errRefused = &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/apis", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
	errReset = &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/apis", Err: &net.OpError{Op: "read", Net: "tcp",
		Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}}
	errH2Lost = &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/apis", Err: errors.New("http2: client connection lost")}
	claimsGR  = schema.GroupResource{Group: extv1alpha1.GroupVersion.Group, Resource: "sandboxclaims"}
)

func TestRetryableAPIError(t *testing.T) {
	cases := []struct {
		name              string
		err               error
		wantRead, wantWrt bool
	}{
		{"connection refused: nothing reached the server", errRefused, true, true},
		{"connection reset: a write may have been applied", errReset, true, false},
		{"EOF before the answer", &url.Error{Op: "Get", URL: "x", Err: io.EOF}, true, false},
		{"unexpected EOF", &url.Error{Op: "Get", URL: "x", Err: io.ErrUnexpectedEOF}, true, false},
		{"HTTP/2 connection lost", errH2Lost, true, false},
		{"TLS handshake timeout while kube-apiserver starts", &url.Error{Op: "Get", URL: "x", Err: errors.New("net/http: TLS handshake timeout")}, true, false},
		{"the answer's body cut (kube-apiserver killed mid-answer)", fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w",
			errors.New("http2: client connection force closed via ClientConn.Close")), true, false},
		{"503 service unavailable", apierrors.NewServiceUnavailable("starting"), true, false},
		{"504 timeout", apierrors.NewTimeoutError("slow", 1), true, false},
		{"server timeout", apierrors.NewServerTimeout(claimsGR, "get", 1), true, false},
		{"429 too many requests", apierrors.NewTooManyRequests("busy", 1), true, false},
		{"etcd request timed out", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true, false},
		{"etcd leader changed", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), true, false},
		{"another internal error", apierrors.NewInternalError(errors.New("conversion webhook failed")), false, false},
		{"the conversion webhook's connection lost (its process killed): a write may have been applied", apierrors.NewInternalError(errors.New(
			`conversion webhook for agents.x-k8s.io/v1beta1, Kind=Sandbox failed: Post "https://agent-sandbox-webhook-service.agent-sandbox-system.svc:443/convert?timeout=30s": write tcp 10.244.0.1:54076->10.96.139.119:443: write: broken pipe`)), true, false},
		{"the conversion webhook refused the object: not sent again", apierrors.NewInternalError(errors.New(
			`conversion webhook for agents.x-k8s.io/v1beta1, Kind=Sandbox failed: conversion request failed with status Failure: unknown field`)), false, false},
		{"not found", apierrors.NewNotFound(claimsGR, "x"), false, false},
		{"forbidden", apierrors.NewForbidden(claimsGR, "x", errors.New("no")), false, false},
		{"conflict", apierrors.NewConflict(claimsGR, "x", errors.New("changed")), false, false},
		{"context canceled", &url.Error{Op: "Get", URL: "x", Err: context.Canceled}, false, false},
		{"context deadline", &url.Error{Op: "Get", URL: "x", Err: context.DeadlineExceeded}, false, false},
		{"no error", nil, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryableAPIError(tc.err, false); got != tc.wantRead {
				t.Errorf("read: retryable = %v, want %v", got, tc.wantRead)
			}
			if got := retryableAPIError(tc.err, true); got != tc.wantWrt {
				t.Errorf("write: retryable = %v, want %v", got, tc.wantWrt)
			}
		})
	}
}

// failFirst returns a function failing its first n calls with err (every call when n < 0)
// and counting them all.
func failFirst(n int, err error, calls *int) func() error {
	return func() error {
		*calls++
		if n < 0 || *calls <= n {
			return err
		}
		return nil
	}
}

// The client the SDK builds retries a read while the API server is away, a write only when
// its connection was refused, and gives up with the last error.
func TestKubeClientRetries(t *testing.T) {
	claim := testwrap.MakeClaim("default", "c").Template("tmpl").Obj()
	cases := []struct {
		name      string
		funcs     func(calls *int) interceptor.Funcs
		call      func(context.Context, client.Client) error
		timeout   time.Duration
		wantCalls int
		wantErr   error // nil: success
	}{
		{name: "a Get refused twice succeeds on the third attempt", wantCalls: 3,
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(2, errRefused, calls)
				return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
					if err := f(); err != nil {
						return err
					}
					return c.Get(ctx, k, o, opts...)
				}}
			},
			call: func(ctx context.Context, c client.Client) error {
				return c.Get(ctx, client.ObjectKeyFromObject(claim), &extv1alpha1.SandboxClaim{})
			}},
		{name: "a List unavailable (503) twice succeeds on the third attempt", wantCalls: 3,
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(2, apierrors.NewServiceUnavailable("starting"), calls)
				return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
					if err := f(); err != nil {
						return err
					}
					return c.List(ctx, l, opts...)
				}}
			},
			call: func(ctx context.Context, c client.Client) error { return c.List(ctx, &extv1alpha1.SandboxClaimList{}) }},
		{name: "a Get forbidden is not retried", wantCalls: 1, wantErr: apierrors.NewForbidden(claimsGR, "c", errors.New("no")),
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(-1, apierrors.NewForbidden(claimsGR, "c", errors.New("no")), calls)
				return interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return f()
				}}
			},
			call: func(ctx context.Context, c client.Client) error {
				return c.Get(ctx, client.ObjectKeyFromObject(claim), &extv1alpha1.SandboxClaim{})
			}},
		{name: "a Create refused is sent again: nothing reached the server", wantCalls: 2,
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(1, errRefused, calls)
				return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
					if err := f(); err != nil {
						return err
					}
					return c.Create(ctx, o, opts...)
				}}
			},
			call: func(ctx context.Context, c client.Client) error {
				return c.Create(ctx, testwrap.MakeClaim("default", "new").Template("tmpl").Obj())
			}},
		{name: "a Create cut by a connection reset is not sent again: it may have been applied", wantCalls: 1, wantErr: errReset,
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(-1, errReset, calls)
				return interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
					return f()
				}}
			},
			call: func(ctx context.Context, c client.Client) error { return c.Create(ctx, claim.DeepCopy()) }},
		{name: "a Patch timing out (504) is not sent again", wantCalls: 1, wantErr: apierrors.NewTimeoutError("slow", 1),
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(-1, apierrors.NewTimeoutError("slow", 1), calls)
				return interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
					return f()
				}}
			},
			call: func(ctx context.Context, c client.Client) error { return c.Patch(ctx, claim.DeepCopy(), emptyPatch) }},
		{name: "a Get refused until the context ends returns the last error", timeout: 800 * time.Millisecond, wantErr: errRefused,
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(-1, errRefused, calls)
				return interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return f()
				}}
			},
			call: func(ctx context.Context, c client.Client) error {
				return c.Get(ctx, client.ObjectKeyFromObject(claim), &extv1alpha1.SandboxClaim{})
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			inner := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(claim.DeepCopy()).Build()
			kc := withAPIRetries(interceptor.NewClient(inner, tc.funcs(&calls)))
			ctx := testCtx(t)
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			err := tc.call(ctx, kc)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tc.wantErr != nil && (err == nil || !strings.Contains(err.Error(), tc.wantErr.Error())):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			case tc.wantErr == errRefused && !errors.Is(err, syscall.ECONNREFUSED):
				t.Fatalf("err = %v does not wrap the refused connection", err)
			}
			if tc.wantCalls == 0 && calls < 3 {
				t.Fatalf("%d calls, want it retried until the context ended", calls)
			}
			if tc.wantCalls > 0 && calls != tc.wantCalls {
				t.Fatalf("%d calls, want %d", calls, tc.wantCalls)
			}
		})
	}
}

// fakeWatch is a watch that delivers events and then stays open.
func fakeWatch(events ...watch.Event) watch.Interface {
	w := watch.NewFakeWithChanSize(len(events), false)
	for _, ev := range events {
		w.Action(ev.Type, ev.Object)
	}
	return w
}

// A wait goes on through an API server restart, past the client's own retries, until its
// own timeout: a watch that cannot be established, a read after an expired watch, and the
// reads of a caller without get rights fail for a while, then the object shows up ready or
// gone.
func TestWaitsRideOutAnAPIServerRestart(t *testing.T) {
	pending := testwrap.MakeClaim("default", "c").Template("tmpl").Obj()
	pending.ResourceVersion = "5"
	ready := testwrap.MakeClaim("default", "c").Template("tmpl").ReadyWith("sb", "10.0.0.1").Obj()
	ready.ResourceVersion = "7"
	expired := watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired("too old").ErrStatus}
	claimList := func() client.ObjectList { return &extv1alpha1.SandboxClaimList{} }
	waitReady := func(ctx context.Context, c *Client) error {
		_, err := waitFor(ctx, c, pending.DeepCopy(), claimList, claimReadiness, waitConfig{})
		return err
	}
	cases := []struct {
		name  string
		funcs func(calls *int) interceptor.Funcs
		wait  func(context.Context, *Client) error
	}{
		{name: "waiting for ready: the read after an expired watch is refused twice", wait: waitReady,
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(2, errRefused, calls)
				return interceptor.Funcs{
					Watch: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
						return fakeWatch(expired), nil
					},
					Get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, o client.Object, _ ...client.GetOption) error {
						if err := f(); err != nil {
							return err
						}
						ready.DeepCopyInto(o.(*extv1alpha1.SandboxClaim))
						return nil
					},
				}
			}},
		{name: "waiting for ready: the watch's HTTP/2 connection is lost", wait: waitReady,
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(1, errH2Lost, calls)
				return interceptor.Funcs{Watch: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
					if err := f(); err != nil {
						return nil, err
					}
					return fakeWatch(watch.Event{Type: watch.Modified, Object: ready.DeepCopy()}), nil
				}}
			}},
		{name: "waiting for deletion: the watch is refused twice",
			wait: func(ctx context.Context, c *Client) error { return c.waitGone(ctx, pending.DeepCopy(), waitConfig{}) },
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(2, errRefused, calls)
				return interceptor.Funcs{Watch: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
					if err := f(); err != nil {
						return nil, err
					}
					return fakeWatch(watch.Event{Type: watch.Deleted, Object: pending.DeepCopy()}), nil
				}}
			}},
		{name: "waiting for deletion: the read after an expired watch is unavailable twice",
			wait: func(ctx context.Context, c *Client) error { return c.waitGone(ctx, pending.DeepCopy(), waitConfig{}) },
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(2, apierrors.NewServiceUnavailable("starting"), calls)
				return interceptor.Funcs{
					Watch: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
						return fakeWatch(expired), nil
					},
					Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
						if err := f(); err != nil {
							return err
						}
						return apierrors.NewNotFound(claimsGR, "c")
					},
				}
			}},
		{name: "waiting for deletion without get rights: the empty patch is unavailable twice",
			wait: func(ctx context.Context, c *Client) error { return c.waitClaimGone(ctx, "c", waitConfig{}) },
			funcs: func(calls *int) interceptor.Funcs {
				f := failFirst(2, apierrors.NewServiceUnavailable("starting"), calls)
				return interceptor.Funcs{
					Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
						return apierrors.NewForbidden(claimsGR, "c", errors.New("no get"))
					},
					Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
						if err := f(); err != nil {
							return err
						}
						return apierrors.NewNotFound(claimsGR, "c")
					},
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			inner := fake.NewClientBuilder().WithScheme(Scheme()).Build()
			// Without withAPIRetries: what is tested is the wait's own resumption.
			c := &Client{ns: "default", kube: interceptor.NewClient(inner, tc.funcs(&calls)),
				opts: Options{ReadyTimeout: 30 * time.Second}}
			if err := tc.wait(testCtx(t), c); err != nil {
				t.Fatalf("wait = %v, want it to outlast the failures", err)
			}
			if calls < 2 {
				t.Fatalf("%d failing calls, want the failures to have happened", calls)
			}
		})
	}
}
