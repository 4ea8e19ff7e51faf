package router

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap/fakeapi"
)

// metricsReader is the user the fake API server lets get /metrics, as a binding to
// agent-sandbox-metrics-reader would.
const metricsReader = "system:serviceaccount:monitoring:prometheus"

// TestRouterMetricsNeedAReaderToken: the probe port's /metrics answers only a caller the API
// server allows get on /metrics; /healthz and /readyz answer the kubelet without a token and
// carry no metrics. --metrics-auth=false is the control: then anyone reads them.
func TestRouterMetricsNeedAReaderToken(t *testing.T) {
	cfg, reviews := fakeapi.ReviewAPI(t, map[string]string{"reader-token": metricsReader, "tenant-token": "system:serviceaccount:team-a:agent"}, metricsReader)
	m := NewMetrics(inventory{"team-a": 3})
	m.requests.WithLabelValues("GET", "200", "team-a").Inc()
	for _, tc := range []struct {
		name, path, token string
		metricsAuth       bool
		wantCode          int
		wantMetrics       bool // the body names a tenant's namespace in a series
	}{
		{"metrics without a token", "/metrics", "", true, http.StatusUnauthorized, false},
		// controller-runtime's filter answers a token the API server rejects with 500
		// "Authentication failed" (the apiserver's bearer token authenticator reports it as an
		// error); what matters is that nothing is served.
		{"metrics with an invalid token", "/metrics", "forged", true, http.StatusInternalServerError, false},
		{"metrics with a tenant's token", "/metrics", "tenant-token", true, http.StatusForbidden, false},
		{"metrics with a reader's token", "/metrics", "reader-token", true, http.StatusOK, true},
		{"healthz without a token", "/healthz", "", true, http.StatusOK, false},
		{"readyz without a token", "/readyz", "", true, http.StatusOK, false},
		{"metrics without a token, --metrics-auth=false", "/metrics", "", false, http.StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.MetricsAuth = tc.metricsAuth
			protect, err := o.MetricsProtector(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			probes, err := ProbeHandler(func() bool { return true }, m, protect)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(probes)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			before := reviews.Load()
			resp, err := h1Client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tc.wantCode {
				t.Errorf("GET %s: %d %q, want %d", tc.path, resp.StatusCode, body, tc.wantCode)
			}
			if got := strings.Contains(body, `sandbox_namespace="team-a"`); got != tc.wantMetrics {
				t.Errorf("GET %s: body names the tenant's namespace = %v, want %v", tc.path, got, tc.wantMetrics)
			}
			if tc.path != "/metrics" && reviews.Load() != before {
				t.Errorf("GET %s asked the API server: probes must not depend on it", tc.path)
			}
		})
	}
}
