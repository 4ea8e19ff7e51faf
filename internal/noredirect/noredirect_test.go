package noredirect

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestClientsNeverFollowARedirect: a server answering 3xx toward a canary on another port of the
// same host; the canary gets nothing (neither the request nor the Authorization header Go would
// resend there), and the caller sees the 3xx with its Location.
func TestClientsNeverFollowARedirect(t *testing.T) {
	var canaryHits atomic.Int32
	canary := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { canaryHits.Add(1) }))
	defer canary.Close()
	for _, tc := range []struct {
		name   string
		client *http.Client
		status int
	}{
		{"nil client, 307", nil, http.StatusTemporaryRedirect},
		{"client with a timeout, 307", &http.Client{Timeout: 2 * time.Second}, http.StatusTemporaryRedirect},
		{"client with a transport, 302", &http.Client{Transport: &http.Transport{}}, http.StatusFound},
		{"client that follows redirects, 308", &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}, http.StatusPermanentRedirect},
		{"303", nil, http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sandbox := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, canary.URL+"/v1/mkdir/x", tc.status)
			}))
			defer sandbox.Close()
			c := Client(tc.client)
			req, _ := http.NewRequest(http.MethodPost, sandbox.URL+"/v1/activity", nil)
			req.Header.Set("Authorization", "Bearer secret")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("Location") != canary.URL+"/v1/mkdir/x" {
				t.Errorf("got %d Location %q, want %d to the canary", resp.StatusCode, resp.Header.Get("Location"), tc.status)
			}
			if n := canaryHits.Load(); n != 0 {
				t.Errorf("the canary got %d requests, want none", n)
			}
			if tc.client != nil && tc.client.Timeout != c.Timeout {
				t.Errorf("Timeout %v, want %v kept", c.Timeout, tc.client.Timeout)
			}
			if c.Transport != nil {
				c.Transport.(*http.Transport).CloseIdleConnections()
			}
		})
	}
}
