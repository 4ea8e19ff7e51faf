package router

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
)

// inventory is a Sandbox cache of fixed size per namespace.
type inventory map[string]int

func (i inventory) Len() int {
	n := 0
	for _, c := range i {
		n += c
	}
	return n
}

func (i inventory) HasNamespace(ns string) bool { return i[ns] > 0 }

func TestMetricsNamespaceLabel(t *testing.T) {
	m := NewMetrics(inventory{"team-a": 1})
	tests := []struct {
		name, namespace, want string
	}{
		{"a namespace that holds a Sandbox is its own label", "team-a", "team-a"},
		{"a namespace the cache does not know cannot mint a label value", "made-up-by-the-caller", noNamespace},
		{"no namespace", "", noNamespace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.namespace(tc.namespace); got != tc.want {
				t.Errorf("namespace(%q) = %q, want %q", tc.namespace, got, tc.want)
			}
		})
	}
}

func TestMetricsRequestCode(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		code     int
		wantCode string
	}{
		{"a 502 to a client still waiting is a 502", context.Background(), http.StatusBadGateway, "502"},
		{"a 502 to a client that went away is a 499", canceled, http.StatusBadGateway, codeClientClosed},
		{"a 200 stays a 200 even when the client left afterwards", canceled, http.StatusOK, "200"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics(inventory{"default": 1})
			r := httptest.NewRequestWithContext(tc.ctx, http.MethodGet, "/", nil)
			r.Header.Set(HeaderSandboxID, "sb")
			m.observeRequest(r, tc.code, 0)
			if got := testutil.ToFloat64(m.requests.WithLabelValues("GET", tc.wantCode, "default")); got != 1 {
				t.Errorf("requests{code=%q} = %v, want 1", tc.wantCode, got)
			}
		})
	}
}

func TestMetricsAuthzDecisions(t *testing.T) {
	port := authUpstream(t)
	a, err := access.NewStaticTokenAuthenticator("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		authn        access.Authenticator
		token        string
		wantDecision string // "" when no decision is counted
		wantStage    string // "" when no review failed
	}{
		{"a valid token is let through", a, "s3cret", decisionAllow, ""},
		{"a wrong token is refused", a, "nope", decisionDeny, ""},
		{"an authenticator that cannot answer is no decision", failingAuthenticator{}, "any", "", "authentication"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics(nil)
			router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}},
				guard: GuardOptions{Authenticator: tc.authn}, metrics: m})
			req := routed(t, "GET", router.URL+"/", "sb", port, nil)
			req.Header.Set("Authorization", "Bearer "+tc.token)
			resp, err := h1Client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			for _, d := range []string{decisionAllow, decisionDeny} {
				want := 0.0
				if d == tc.wantDecision {
					want = 1
				}
				if got := testutil.ToFloat64(m.authzDecisions.WithLabelValues("default", d)); got != want {
					t.Errorf("authz_decisions_total{decision=%q} = %v, want %v", d, got, want)
				}
			}
			if tc.wantStage != "" {
				if got := testutil.ToFloat64(m.authzUnavailable.WithLabelValues(tc.wantStage)); got != 1 {
					t.Errorf("authz_unavailable_total{stage=%q} = %v, want 1", tc.wantStage, got)
				}
			}
		})
	}
}

// failingAuthenticator cannot reach its TokenReview.
type failingAuthenticator struct{}

func (failingAuthenticator) Authenticate(context.Context, string) (*access.Identity, error) {
	return nil, errors.New("the API server is unreachable")
}
