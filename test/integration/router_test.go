package integration

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The whole control path: the Sandbox controller publishes the pod IP in status, the router's
// watch cache picks it up, and a request carrying X-Sandbox-ID reaches the pod (here a local
// server standing in for the pod's runtime); deleting the Sandbox makes the route 404.
func TestRouterRoutesToTheSandboxTheControllerReports(t *testing.T) {
	ns := newNamespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	cache := router.NewSandboxCache(true) // the stand-in pod listens on loopback
	informers, err := cache.Attach(ctx, env.Config, ns)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = informers.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !toolscache.WaitForCacheSync(ctx.Done(), cache.HasSynced) {
		t.Fatal("router cache never synced")
	}

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from "+r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	_, port, _ := net.SplitHostPort(upstream.Listener.Addr().String())
	proxy := router.NewProxy(router.ProxyOptions{Resolver: cache})
	t.Cleanup(proxy.Close)
	front := httptest.NewServer(router.NewHandler(router.HandlerOptions{Proxy: proxy}))
	t.Cleanup(front.Close)

	call := func() (int, string) {
		req, _ := http.NewRequest(http.MethodGet, front.URL+"/execute", nil)
		req.Header.Set("X-Sandbox-ID", "routed")
		req.Header.Set("X-Sandbox-Namespace", ns)
		req.Header.Set("X-Sandbox-Port", port)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	expect := func(what string, code int) {
		t.Helper()
		testwrap.Eventually(t, what, func() error {
			if got, body := call(); got != code {
				return errors.New("status " + http.StatusText(got) + ": " + body)
			}
			return nil
		})
	}

	sb := create(t, testwrap.MakeSandbox(ns, "routed").Obj())
	expect("503 while the pod is not ready", http.StatusServiceUnavailable)
	setPodStatus(t, waitForPod(t, ns, "routed"), running("127.0.0.1"))
	expect("200 once the sandbox is ready", http.StatusOK)
	if _, body := call(); body != "hello from /execute" {
		t.Errorf("body = %q, want the upstream's answer", body)
	}
	if err := k8s.Delete(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	expect("404 after the sandbox is deleted", http.StatusNotFound)
}
