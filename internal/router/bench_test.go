package router

import (
	"io"
	"net/http"
	"testing"
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
