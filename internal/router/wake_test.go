package router

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

// pausedSandbox is ns/sb paused by its idle timeout, waking on request.
func pausedSandbox(annotations map[string]string) *agentsv1beta1.Sandbox {
	sb := sandbox("default", "sb", metav1.ConditionFalse, agentsv1beta1.ReasonIdlePaused)
	sb.Annotations = annotations
	sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	sb.ResourceVersion = "41"
	return sb
}

var idleAnnotations = map[string]string{agentsv1beta1.IdleTimeoutAnnotation: "5m"}

// fakeWaker resumes the way the controller and kubelet would: replicas 1 at once, the pod
// Pending, then Ready at the upstream's address a moment later.
type fakeWaker struct {
	cache   *SandboxCache
	readyAt string        // pod IP once ready
	delay   time.Duration // until ready; negative: never
	calls   atomic.Int32
	wg      sync.WaitGroup
}

func (f *fakeWaker) Resume(_ context.Context, ns, name, _ string) (bool, error) {
	f.calls.Add(1)
	starting := sandbox(ns, name, metav1.ConditionFalse, agentsv1beta1.ReasonPodPending)
	starting.Annotations = idleAnnotations
	f.cache.OnUpdate(nil, starting)
	if f.delay < 0 {
		return true, nil
	}
	f.wg.Go(func() {
		time.Sleep(f.delay)
		ready := sandbox(ns, name, metav1.ConditionTrue, agentsv1beta1.ReasonReady, f.readyAt)
		ready.Annotations = idleAnnotations
		f.cache.OnUpdate(nil, ready)
	})
	return true, nil
}

func TestFiftyRequestsToAPausedSandboxResumeItOnceAndAreAllAnswered(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "awake") }))
	cache := NewSandboxCache(true)
	cache.OnAdd(pausedSandbox(idleAnnotations), true)
	waker := &fakeWaker{cache: cache, readyAt: "127.0.0.1", delay: 200 * time.Millisecond}
	t.Cleanup(waker.wg.Wait)
	router := newRouter(t, routerOpts{resolver: cache, waker: waker})
	client := h1Client(t)

	var wg sync.WaitGroup
	answers := make([]string, 50)
	for i := range answers {
		wg.Go(func() {
			resp, err := client.Do(routed(t, "GET", router.URL+"/", "sb", port, nil).WithContext(testCtx(t)))
			if err != nil {
				answers[i] = err.Error()
				return
			}
			answers[i] = fmt.Sprintf("%d %s", resp.StatusCode, readAll(t, resp))
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a != "200 awake" {
			t.Errorf("request %d: %q; want 200 awake once the sandbox woke", i, a)
		}
	}
	if n := waker.calls.Load(); n != 1 {
		t.Fatalf("%d resumes for 50 concurrent requests; want exactly 1", n)
	}
}

func TestWakeOnRequestAnswersWithoutResumingWhereItMustNot(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	deny := GuardOptions{
		Authenticator: authnFunc(func(context.Context, string) (*access.Identity, error) {
			return &access.Identity{User: authnv1.UserInfo{Username: "mallory"}}, nil
		}),
		Authorizer: authzFunc(func(context.Context, *access.Identity, string, string) (bool, error) { return false, nil }),
	}
	tests := []struct {
		name       string
		sandbox    *agentsv1beta1.Sandbox
		guard      GuardOptions
		wantCode   int
		wantDetail string
	}{
		{"a caller without rights: 403, nothing resumed", pausedSandbox(idleAnnotations), deny, http.StatusForbidden, ""},
		{"a Sandbox paused by hand without wake-on-request: 503 at once", pausedSandbox(nil), GuardOptions{},
			http.StatusServiceUnavailable, "sandbox default/sb is not ready (IdlePaused)"},
		{"wake-on-request false beats the idle timeout", pausedSandbox(map[string]string{agentsv1beta1.IdleTimeoutAnnotation: "5m",
			agentsv1beta1.WakeOnRequestAnnotation: "false"}), GuardOptions{}, http.StatusServiceUnavailable, "is not ready (IdlePaused)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cache := NewSandboxCache(true)
			cache.OnAdd(tc.sandbox, true)
			waker := &fakeWaker{cache: cache, readyAt: "127.0.0.1"}
			t.Cleanup(waker.wg.Wait)
			router := newRouter(t, routerOpts{resolver: cache, waker: waker, guard: tc.guard})
			req := routed(t, "GET", router.URL+"/", "sb", port, nil)
			req.Header.Set("Authorization", "Bearer t")
			resp, err := h1Client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tc.wantCode || !strings.Contains(body, tc.wantDetail) {
				t.Errorf("answer %d %s; want %d containing %q", resp.StatusCode, body, tc.wantCode, tc.wantDetail)
			}
			if n := waker.calls.Load(); n != 0 {
				t.Errorf("%d resumes; want none", n)
			}
		})
	}
}

func TestARequestWaitsForAWokenSandboxUpToItsBound(t *testing.T) {
	cache := NewSandboxCache(true)
	cache.OnAdd(pausedSandbox(idleAnnotations), true)
	waker := &fakeWaker{cache: cache, readyAt: "127.0.0.1", delay: -1} // never ready
	router := newRouter(t, routerOpts{resolver: cache, waker: waker})
	tests := []struct {
		name, header string
		wantCode     int
		wantDetail   string
	}{
		{"past X-Sandbox-Wake-Timeout: 503 with Retry-After", "0.2", http.StatusServiceUnavailable,
			"sandbox default/sb is not ready (WakingUp: resumed on request and not ready after 200ms; retry)"},
		{"a bad X-Sandbox-Wake-Timeout: 400", "soon", http.StatusBadRequest, msgInvalidWake},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := routed(t, "GET", router.URL+"/", "sb", "", nil)
			req.Header.Set(HeaderWakeTimeout, tc.header)
			resp, err := h1Client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := detail(t, resp); resp.StatusCode != tc.wantCode || got != tc.wantDetail {
				t.Fatalf("answer %d %q; want %d %q", resp.StatusCode, got, tc.wantCode, tc.wantDetail)
			}
			if tc.wantCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				t.Errorf("a 503 past the wake bound without Retry-After")
			}
		})
	}
}

type authnFunc func(context.Context, string) (*access.Identity, error)

func (f authnFunc) Authenticate(ctx context.Context, token string) (*access.Identity, error) {
	return f(ctx, token)
}

type authzFunc func(context.Context, *access.Identity, string, string) (bool, error)

func (f authzFunc) Authorize(ctx context.Context, id *access.Identity, namespace, name string) (bool, error) {
	return f(ctx, id, namespace, name)
}

// A request held while its Sandbox wakes goes on in whatever protocol it came in: HTTP/1.1,
// h2c (gRPC's), or a WebSocket upgrade.
func TestAWokenSandboxAnswersEveryProtocol(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "websocket" {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			_ = c.Write(r.Context(), websocket.MessageText, []byte("awake over websocket"))
			_, _, _ = c.Read(r.Context())
			return
		}
		fmt.Fprintf(w, "awake over HTTP/%d", r.ProtoMajor)
	}))
	tests := []struct {
		name string
		send func(t *testing.T, url string) string
	}{
		{"HTTP/1.1", func(t *testing.T, url string) string {
			resp, err := h1Client(t).Do(routed(t, "GET", url+"/", "sb", port, nil))
			if err != nil {
				t.Fatal(err)
			}
			return readAll(t, resp)
		}},
		{"h2c", func(t *testing.T, url string) string {
			resp, err := h2cClient(t).Do(routed(t, "GET", url+"/", "sb", port, nil))
			if err != nil {
				t.Fatal(err)
			}
			return readAll(t, resp)
		}},
		{"WebSocket", func(t *testing.T, url string) string {
			h := http.Header{}
			h.Set(HeaderSandboxID, "sb")
			h.Set(HeaderSandboxPort, port)
			conn, _, err := websocket.Dial(testCtx(t), "ws"+strings.TrimPrefix(url, "http")+"/ws",
				&websocket.DialOptions{HTTPHeader: h, HTTPClient: h1Client(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.CloseNow()
			_, msg, err := conn.Read(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			return string(msg)
		}},
	}
	want := map[string]string{"HTTP/1.1": "awake over HTTP/1", "h2c": "awake over HTTP/2", "WebSocket": "awake over websocket"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cache := NewSandboxCache(true)
			cache.OnAdd(pausedSandbox(idleAnnotations), true)
			waker := &fakeWaker{cache: cache, readyAt: "127.0.0.1", delay: 100 * time.Millisecond}
			t.Cleanup(waker.wg.Wait)
			router := newRouter(t, routerOpts{resolver: cache, waker: waker})
			if got := tc.send(t, router.URL); got != want[tc.name] || waker.calls.Load() != 1 {
				t.Fatalf("answer %q after %d resumes; want %q after 1", got, waker.calls.Load(), want[tc.name])
			}
		})
	}
}

// What admit would refuse on the known Sandbox never wakes it: a scoped token for an earlier
// Sandbox of the name, a port its containers do not declare.
func TestOnlyARequestThatWouldBeForwardedWakesTheSandbox(t *testing.T) {
	p := NewProxy(ProxyOptions{Resolver: &stubResolver{}, Waker: &fakeWaker{}, DeclaredPortsOnly: true, AllowedPorts: DefaultAllowedPorts})
	t.Cleanup(p.Close)
	paused := Target{UID: "uid-now", Wakes: true, Paused: true, Ports: []uint16{3000}}
	notReady := &ResolveError{Kind: ErrNotReady, Namespace: "default", Name: "sb", Reason: agentsv1beta1.ReasonIdlePaused}
	tests := []struct {
		name  string
		scope *scopedtoken.Claims
		port  uint16
		want  bool
	}{
		{"sandboxd's port", nil, DefaultPort, true},
		{"a declared port", nil, 3000, true},
		{"a scoped token for this Sandbox", &scopedtoken.Claims{UID: "uid-now"}, DefaultPort, true},
		{"a scoped token for an earlier Sandbox of the name", &scopedtoken.Claims{UID: "uid-before"}, DefaultPort, false},
		{"an undeclared port", nil, 6443, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.shouldWait(tc.scope, Route{Namespace: "default", Name: "sb", Port: tc.port}, paused, notReady); got != tc.want {
				t.Fatalf("shouldWait = %v; want %v", got, tc.want)
			}
		})
	}
}
