package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// startRouterCache runs the router's Sandbox cache on a watch of ns (stand-in pods listen on
// loopback) until the test ends.
func startRouterCache(t *testing.T, ns string) *router.SandboxCache {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cache := router.NewSandboxCache(true)
	informers, err := cache.Attach(ctx, env.Config, ns)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = informers.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !toolscache.WaitForCacheSync(ctx.Done(), cache.HasSynced) {
		t.Fatal("router cache never synced")
	}
	return cache
}

// laggingHandler delivers Sandbox updates to the router's cache late, as a router under load
// (or one whose API server is) sees them.
type laggingHandler struct {
	cache *router.SandboxCache
	lag   time.Duration
}

func (h laggingHandler) OnAdd(obj any, initial bool) { h.cache.OnAdd(obj, initial) }
func (h laggingHandler) OnUpdate(old, obj any)       { time.Sleep(h.lag); h.cache.OnUpdate(old, obj) }
func (h laggingHandler) OnDelete(obj any)            { h.cache.OnDelete(obj) }

// startLaggingRouterCache is startRouterCache with every update delivered lag late.
func startLaggingRouterCache(t *testing.T, ns string, lag time.Duration) *router.SandboxCache {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := agentsv1beta1.AddToScheme(scheme); err != nil { // the router watches the storage version
		t.Fatal(err)
	}
	informers, err := crcache.New(env.Config, crcache.Options{Scheme: scheme, DefaultNamespaces: map[string]crcache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cache := router.NewSandboxCache(true)
	inf, err := informers.GetInformer(ctx, &agentsv1beta1.Sandbox{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	reg, err := inf.AddEventHandler(laggingHandler{cache, lag})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = informers.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("router cache never synced")
	}
	return cache
}

// startRouter serves a router with the port rule on (as the binary runs it) in front of cache.
func startRouter(t *testing.T, cache router.Resolver, o router.ProxyOptions, g router.GuardOptions) string {
	t.Helper()
	o.Resolver, o.DeclaredPortsOnly = cache, true
	if o.AllowedPorts == nil {
		o.AllowedPorts = router.DefaultAllowedPorts
	}
	proxy := router.NewProxy(o)
	t.Cleanup(proxy.Close)
	front := httptest.NewServer(router.NewHandler(router.HandlerOptions{Proxy: proxy, Guard: g}))
	t.Cleanup(front.Close)
	return front.URL
}

// standIn starts a server standing in for a sandbox's runtime on loopback; it returns its port.
func standIn(t *testing.T, answer string) int32 {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, answer+" "+r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	_, port, _ := net.SplitHostPort(upstream.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return int32(p)
}

// runtimeOn is the runtime container declaring port as well.
func runtimeOn(port int32) corev1.Container {
	c := testwrap.RuntimeContainer()
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: "standin", ContainerPort: port})
	return c
}

// routerCall sends GET /execute for ns/id on port through the router at url, with token as a
// bearer token when set. It returns the status and the body, or the router's own detail.
func routerCall(url, ns, id string, port int32, token string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, url+"/execute", nil)
	req.Header.Set("X-Sandbox-ID", id)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", strconv.Itoa(int(port)))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var d struct{ Detail string }
	if resp.Header.Get("Content-Type") == "application/json" && json.Unmarshal(body, &d) == nil && d.Detail != "" {
		return resp.StatusCode, d.Detail
	}
	return resp.StatusCode, string(body)
}

// The whole control path: the Sandbox controller publishes the pod IP in status, the router's
// watch cache picks it up, and a request carrying X-Sandbox-ID reaches the pod (here a local
// server standing in for the pod's runtime) on a port the Sandbox declares, and on no other;
// deleting the Sandbox makes the route 404.
func TestRouterRoutesToTheSandboxTheControllerReports(t *testing.T) {
	ns := newNamespace(t)
	port := standIn(t, "hello from")
	url := startRouter(t, startRouterCache(t, ns), router.ProxyOptions{}, router.GuardOptions{})
	expect := func(what string, port int32, code int) {
		t.Helper()
		testwrap.Eventually(t, what, func() error {
			if got, body := routerCall(url, ns, "routed", port, ""); got != code {
				return errors.New("status " + http.StatusText(got) + ": " + body)
			}
			return nil
		})
	}

	sb := create(t, testwrap.MakeSandbox(ns, "routed").Containers(runtimeOn(port)).Obj())
	expect("503 while the pod is not ready", port, http.StatusServiceUnavailable)
	setPodStatus(t, waitForPod(t, ns, "routed"), running("127.0.0.1"))
	expect("200 once the sandbox is ready", port, http.StatusOK)
	if _, body := routerCall(url, ns, "routed", port, ""); body != "hello from /execute" {
		t.Errorf("body = %q, want the upstream's answer", body)
	}
	want := fmt.Sprintf("Port 10250 is not declared by the containers of sandbox %s/routed.", ns)
	if code, detail := routerCall(url, ns, "routed", 10250, ""); code != http.StatusForbidden || detail != want {
		t.Errorf("port 10250: %d %q, want 403 %q", code, detail, want)
	}
	if err := k8s.Delete(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	expect("404 after the sandbox is deleted", port, http.StatusNotFound)
}

// A warm pool member is not routable until a claim takes it, and the claim's first request
// succeeds: the client reads the claim's status and calls at once, with no retry, through a
// router whose watch has not delivered the adoption yet (it lags by half a second here).
func TestRouterAnswersAJustClaimedPoolMember(t *testing.T) {
	ns := newNamespace(t)
	port := standIn(t, "claimed")
	cache := startLaggingRouterCache(t, ns, 500*time.Millisecond)
	atOnce := startRouter(t, cache, router.ProxyOptions{}, router.GuardOptions{})
	hot := startRouter(t, cache, router.ProxyOptions{UnclaimedWait: router.DefaultOptions().UnclaimedWait}, router.GuardOptions{})
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tmpl").Containers(runtimeOn(port)).Obj(),
		testwrap.MakeWarmPool(ns, "pool").Template("tmpl").Replicas(1).Obj())
	var member string
	testwrap.Eventually(t, "a pool member", func() error {
		for name := range liveMembers(t, ns) {
			member = name
			return nil
		}
		return errors.New("no member yet")
	})
	setPodStatus(t, waitForPod(t, ns, member), running("127.0.0.1"))
	testwrap.Eventually(t, "the pool ready", poolReady(t, ns, "pool", 1))

	want := fmt.Sprintf("sandbox %s/%s is an unclaimed warm pool member; it is routable once a SandboxClaim takes it", ns, member)
	testwrap.Eventually(t, "the router knows the member", func() error {
		if code, detail := routerCall(atOnce, ns, member, port, ""); code != http.StatusNotFound || detail != want {
			return fmt.Errorf("got %d %q, want 404 %q", code, detail, want)
		}
		return nil
	})

	mustCreateObj(t, testwrap.MakeClaim(ns, "claim").Template("tmpl").Obj())
	// Poll the claim as closely as a client watching it would.
	testwrap.Wait{Interval: time.Millisecond}.Eventually(t, "the claim names its sandbox", func() error {
		c := &extv1alpha1.SandboxClaim{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "claim"}, c); err != nil {
			return err
		}
		if c.Status.SandboxStatus.Name == "" {
			return errors.New("no sandbox in status yet")
		}
		return nil
	})
	if name := getClaim(t, ns, "claim").Status.SandboxStatus.Name; name != member {
		t.Fatalf("the claim took %q, want the pool member %q", name, member)
	}
	if code, body := routerCall(hot, ns, member, port, ""); code != http.StatusOK || body != "claimed /execute" {
		t.Fatalf("first request after the claim: %d %q, want 200 from the sandbox", code, body)
	}
	sb := getSandbox(t, ns, member)
	if owner := metav1.GetControllerOf(sb); owner == nil || owner.Kind != "SandboxClaim" {
		t.Errorf("member owner %+v, want the claim", owner)
	}
}
