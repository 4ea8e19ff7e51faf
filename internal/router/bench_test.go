package router

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access/accesstest"
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
	var took []time.Duration
	defer func() { reportPercentiles(b, took) }()
	for b.Loop() {
		start := time.Now()
		resp, err := client.Do(newReq())
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		took = append(took, time.Since(start))
	}
}

// reportPercentiles adds the p50 and p99 of one request's round trip to the benchmark's output:
// the router's cost is read as a difference of medians, which a mean hides behind outliers.
func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
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
	pods := access.NewPodCache(true)
	pods.OnAdd(accesstest.Pod("default", "client", "worker", "Running", false, "127.0.0.1"), true)
	sars := &fakeSARs{grants: map[string]bool{
		sarKey("system:serviceaccount:default:worker", "create", "sandboxes/proxy.agents.x-k8s.io", "default", "sb"): true}}
	guards := []struct {
		name  string
		guard GuardOptions
	}{
		{"none", GuardOptions{}},
		{"pod-identity", GuardOptions{
			Authenticator: access.NewTokenReviewAuthenticator(&accesstest.TokenReviewer{}, time.Minute, 0, 16),
			Authorizer:    access.NewSandboxAuthorizer(&access.HeldRightsReviewer{Client: sars}, time.Hour, time.Hour, 0, 64),
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
