package router

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/noredirect"
)

// canary is another pod a sandbox's redirect points at; it counts what reaches it.
func canary(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// redirecting is a sandbox stand-in that answers every request with status toward location.
func redirecting(status int, location string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", location)
		w.WriteHeader(status)
	})
}

// TestActivityNotesNeverFollowARedirect: sandboxd (untrusted: any code in the sandbox may listen
// on its port) answers the router's activity note with a redirect to another pod's sandboxd; the
// router must not send anything there, since every Sandbox's NetworkPolicy admits the router.
func TestActivityNotesNeverFollowARedirect(t *testing.T) {
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			other, hits := canary(t)
			_, port := newUpstream(t, redirecting(status, other.URL+"/v1/mkdir/home/other?x=1"))
			p := NewProxy(ProxyOptions{Resolver: &stubResolver{}})
			t.Cleanup(p.Close)
			got, err := p.sendTouch(context.Background(), netip.AddrPortFrom(loopback.Addr, mustPort(t, port)))
			if err != nil {
				t.Fatalf("sendTouch: %v", err)
			}
			if got != status {
				t.Errorf("activity note answered %d, want the sandbox's own %d", got, status)
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the other pod got %d requests from the router, want none", n)
			}
		})
	}
}

// TestProxyPassesASandboxRedirectUnchanged: a proxied request's 3xx goes back to the caller as
// the sandbox wrote it (status, Location, body); the router fetches nothing from the Location.
func TestProxyPassesASandboxRedirectUnchanged(t *testing.T) {
	other, hits := canary(t)
	location := other.URL + "/v1/mkdir/home/other"
	_, port := newUpstream(t, redirecting(http.StatusTemporaryRedirect, location))
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}})
	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"http1", noredirect.Client(h1Client(t))}, {"h2c", noredirect.Client(h2cClient(t))}} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := c.client.Do(routed(t, http.MethodPost, router.URL+"/v1/mkdir/x", "sb", port, nil))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != location {
				t.Errorf("caller saw %d Location %q, want 307 %q", resp.StatusCode, resp.Header.Get("Location"), location)
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the redirect's target got %d requests, want none", n)
			}
		})
	}
}
