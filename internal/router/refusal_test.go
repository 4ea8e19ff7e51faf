package router

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"
)

// A sandbox that refuses an upload without reading it (403 on an escaping path) must answer the
// client promptly over h2c too, not leave both streams waiting on each other.
func TestProxyEndsRefusedUploadOverH2C(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":"path escapes the sandbox root"}`))
	}))
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}, metrics: NewMetrics(nil)})
	client := h2cClient(t)
	for i := 0; i < 20; i++ {
		// Bounded only so a regression fails instead of hanging the suite.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		req := routed(t, http.MethodPut, router.URL+"/v1/files/../escape", "sb", port, bytes.NewReader(make([]byte, 1<<20)))
		resp, err := client.Do(req.WithContext(ctx))
		if err != nil {
			cancel()
			t.Fatalf("upload %d: %v", i, err)
		}
		body := readAll(t, resp)
		cancel()
		if resp.StatusCode != http.StatusForbidden || body == "" {
			t.Fatalf("upload %d: status %d body %q, want the sandbox's 403", i, resp.StatusCode, body)
		}
	}
}
