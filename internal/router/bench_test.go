package router

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// The benchmarks send one small GET at a time, so ns/op is a round-trip latency; the difference
// between Direct and ViaRouter is what the router adds on loopback.

func benchUpstream(b *testing.B) string {
	_, port := newUpstream(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	return port
}

func benchLoop(b *testing.B, client *http.Client, newReq func() *http.Request) {
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Do(newReq())
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

func BenchmarkDirect(b *testing.B) {
	port := benchUpstream(b)
	client := h1Client(b)
	benchLoop(b, client, func() *http.Request {
		r, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/x", nil)
		return r
	})
}

func BenchmarkDirectH2C(b *testing.B) {
	port := benchUpstream(b)
	client := h2cClient(b)
	benchLoop(b, client, func() *http.Request {
		r, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/x", nil)
		return r
	})
}

func benchRouter(b *testing.B) (routerURL, port string) {
	port = benchUpstream(b)
	router := newRouter(b, routerOpts{
		resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}},
		metrics:  NewMetrics(nil),
	})
	return router.URL, port
}

func BenchmarkViaRouterHTTP1(b *testing.B) {
	url, port := benchRouter(b)
	client := h1Client(b)
	benchLoop(b, client, func() *http.Request { return routed(b, "GET", url+"/x", "sb", port, nil) })
}

func BenchmarkViaRouterH2C(b *testing.B) {
	url, port := benchRouter(b)
	client := h2cClient(b)
	benchLoop(b, client, func() *http.Request { return routed(b, "GET", url+"/x", "sb", port, nil) })
}

// BenchmarkPodIdentityCacheHit compares a tokenless request named by its source pod, with the
// decision cached (what --identify-pods adds on every request after the first), to auth none.
func BenchmarkPodIdentityCacheHit(b *testing.B) {
	pods := NewPodCache(true)
	pods.OnAdd(testPod("default", "client", "worker", "Running", false, "127.0.0.1"), true)
	sars := &fakeSARs{grants: map[string]bool{
		sarKey("system:serviceaccount:default:worker", "create", "sandboxes/proxy.agents.x-k8s.io", "default", "sb"): true}}
	guards := []struct {
		name  string
		guard GuardOptions
	}{
		{"none", GuardOptions{}},
		{"pod-identity", GuardOptions{
			Authenticator: NewTokenReviewAuthenticator(&fakeReviewer{}, time.Minute, 16),
			Authorizer:    NewSandboxAuthorizer(&HeldRightsReviewer{Client: sars}, time.Hour, time.Hour, 64),
			Pods:          pods, HeldRights: true}},
	}
	for _, g := range guards {
		b.Run(g.name, func(b *testing.B) {
			port := benchUpstream(b)
			router := newRouter(b, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}},
				metrics: NewMetrics(nil), guard: g.guard})
			client := h1Client(b)
			benchLoop(b, client, func() *http.Request { return routed(b, "GET", router.URL+"/x", "sb", port, nil) })
		})
	}
}
