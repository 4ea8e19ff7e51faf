package manager

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap/fakeapi"
)

// TestControllerMetricsNeedAReaderToken: the metrics server the manager is given answers only
// callers the API server allows get on the non-resource URL /metrics (the controller's metrics
// name every tenant's namespaces and claims); MetricsAuth off (--metrics-auth=false) is the
// control: then anyone reads them.
func TestControllerMetricsNeedAReaderToken(t *testing.T) {
	const reader = "system:serviceaccount:monitoring:prometheus"
	cfg, _ := fakeapi.ReviewAPI(t, map[string]string{"reader-token": reader, "tenant-token": "system:serviceaccount:team-a:agent"}, reader)
	for _, tc := range []struct {
		name, token string
		auth        bool
		wantCode    int
	}{
		{"no token", "", true, http.StatusUnauthorized},
		{"a tenant's token", "tenant-token", true, http.StatusForbidden},
		// controller-runtime's filter answers a token the API server rejects with 500.
		{"an invalid token", "forged", true, http.StatusInternalServerError},
		{"a reader's token", "reader-token", true, http.StatusOK},
		{"no token, MetricsAuth off", "", false, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serveMetrics(t, MetricsServerOptions("127.0.0.1:0", tc.auth), cfg)
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode {
				t.Errorf("GET /metrics: %d %q, want %d", resp.StatusCode, body, tc.wantCode)
			}
			if served := strings.Contains(string(body), "go_goroutines"); served != (tc.wantCode == http.StatusOK) {
				t.Errorf("GET /metrics with %d served metrics = %v", resp.StatusCode, served)
			}
		})
	}
	http.DefaultClient.CloseIdleConnections()
}

// serveMetrics runs controller-runtime's metrics server with o until the test ends and returns
// its address.
func serveMetrics(t *testing.T, o metricsserver.Options, cfg *rest.Config) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(o, cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
		hc.CloseIdleConnections()
	})
	var addr string
	testwrap.Eventually(t, "the metrics server listening", func() error {
		addr = srv.(interface{ GetBindAddr() string }).GetBindAddr()
		if addr == "" {
			return errors.New("no address yet")
		}
		return nil
	})
	return addr
}
