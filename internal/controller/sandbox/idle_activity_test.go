package sandbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRouterActivityNeverFollowsARedirect: the router passes a sandbox's 3xx through, so the
// controller's activity check may get one pointing at another pod (or another port of the
// router's host, where Go would resend the controller's token). It must be an error, with nothing
// sent to the Location.
func TestRouterActivityNeverFollowsARedirect(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("controller-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var canaryHits atomic.Int32
	var canaryAuth atomic.Value
	canaryAuth.Store("")
	canary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		canaryHits.Add(1)
		canaryAuth.Store(r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"lastActivity":"2020-01-01T00:00:00Z"}`))
	}))
	defer canary.Close()
	for _, tc := range []struct {
		name   string
		client *http.Client
		status int
	}{
		{"default client, 307", nil, http.StatusTemporaryRedirect},
		{"the controller's client (cmd/controller), 307", &http.Client{Timeout: 2 * time.Second}, http.StatusTemporaryRedirect},
		{"a client that follows redirects, 308", &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}, http.StatusPermanentRedirect},
		{"302", nil, http.StatusFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			canaryHits.Store(0)
			router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", canary.URL+"/v1/activity")
				w.WriteHeader(tc.status)
			}))
			defer router.Close()
			a := &RouterActivity{URL: router.URL, TokenFile: tokenFile, Client: tc.client}
			_, err := a.Activity(context.Background(), "team-a", "sb")
			if want := "HTTP " + strconv.Itoa(tc.status); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Activity: err = %v, want an error naming %s", err, want)
			}
			if n := canaryHits.Load(); n != 0 {
				t.Errorf("the redirect's target got %d requests (Authorization %q), want none", n, canaryAuth.Load())
			}
		})
	}
}

// TestRouterActivitySendsItsToken: the controller asks the router with its ServiceAccount token
// (read from the file on every call), since a router never names a pod of the controller's
// namespace by its address (--identify-pods-exclude-namespaces); no file, no header.
func TestRouterActivitySendsItsToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("controller-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, wantAuth string
	}{
		{"token file", tokenFile, "Bearer controller-token"},
		{"missing token file", filepath.Join(dir, "absent"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotAuth, gotID, gotNS string
			router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotAuth, gotID, gotNS = r.Header.Get("Authorization"), r.Header.Get("X-Sandbox-ID"), r.Header.Get("X-Sandbox-Namespace")
				_, _ = w.Write([]byte(`{"active":true,"runningProcesses":1}`))
			}))
			defer router.Close()
			a := &RouterActivity{URL: router.URL + "/", TokenFile: tc.file, Client: &http.Client{Timeout: 2 * time.Second}}
			act, err := a.Activity(context.Background(), "team-a", "sb")
			if err != nil || !act.Active || act.RunningProcesses != 1 {
				t.Fatalf("Activity = %+v, %v; want active with one process", act, err)
			}
			if gotAuth != tc.wantAuth || gotID != "sb" || gotNS != "team-a" {
				t.Errorf("router saw Authorization %q, sandbox %s/%s; want %q, team-a/sb", gotAuth, gotNS, gotID, tc.wantAuth)
			}
		})
	}
}
