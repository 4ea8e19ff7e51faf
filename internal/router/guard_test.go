package router

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access/accesstest"
)

// authUpstream reports the Authorization header it received.
func authUpstream(t *testing.T) string {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "auth="+r.Header.Get("Authorization"))
	}))
	return port
}

func TestStaticTokenAuth(t *testing.T) {
	port := authUpstream(t)
	a, err := access.NewStaticTokenAuthenticator("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(nil)
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}},
		guard: GuardOptions{Authenticator: a, Authorizer: access.NewSandboxAuthorizer(nil, 0, 0, 0, 1)}, metrics: m})
	client := h1Client(t)
	tests := []struct {
		name     string
		authz    []string
		id       string
		wantCode int
		wantBody string
	}{
		{"missing", nil, "sb", 401, ""},
		{"basic scheme", []string{"Basic czNjcmV0"}, "sb", 401, ""},
		{"wrong token", []string{"Bearer nope"}, "sb", 401, ""},
		{"prefix of token", []string{"Bearer s3cre"}, "sb", 401, ""},
		{"empty bearer", []string{"Bearer "}, "sb", 401, ""},
		{"two headers", []string{"Bearer s3cret", "Bearer s3cret"}, "sb", 401, ""},
		{"auth before routing checks", []string{"Bearer nope"}, "", 401, ""},
		{"valid", []string{"Bearer s3cret"}, "sb", 200, "auth="},
		{"scheme case-insensitive", []string{"bearer s3cret"}, "sb", 200, "auth="},
		{"valid then bad routing", []string{"Bearer s3cret"}, "", 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := routed(t, "GET", router.URL+"/", tt.id, port, nil)
			for _, v := range tt.authz {
				req.Header.Add("Authorization", v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("code = %d, want %d (%s)", resp.StatusCode, tt.wantCode, body)
			}
			if tt.wantCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			if tt.wantBody != "" && body != tt.wantBody {
				t.Fatalf("upstream saw %q, want %q", body, tt.wantBody)
			}
		})
	}
	// The gateway health check needs no token.
	resp, err := client.Get(router.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || body != `{"status":"ok"}`+"\n" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}
	if _, err := access.NewStaticTokenAuthenticator(""); err == nil {
		t.Fatal("empty token accepted")
	}
}

// authRequest sends one routed request with an optional bearer token and returns code and body.
func authRequest(t *testing.T, client *http.Client, routerURL, ns, id, port, token string) (int, string, http.Header) {
	t.Helper()
	req := routed(t, "GET", routerURL+"/", id, port, nil)
	if ns != "" {
		req.Header.Set(HeaderSandboxNamespace, ns)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, readAll(t, resp), resp.Header
}

func TestTokenReviewAuthentication(t *testing.T) {
	port := authUpstream(t)
	rev := &accesstest.TokenReviewer{Users: map[string]string{"good": "alice"}}
	router := newRouter(t, routerOpts{
		resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}},
		guard:    GuardOptions{Authenticator: access.NewTokenReviewAuthenticator(rev, time.Hour, 0, 16), Authorizer: access.NewSandboxAuthorizer(nil, 0, 0, 0, 1)},
	})
	client := h1Client(t)
	steps := []struct {
		name      string
		token     string
		reviewErr error
		wantCode  int
		wantCalls int
	}{
		{"valid", "good", nil, 200, 1},
		{"valid again is cached", "good", nil, 200, 1},
		{"invalid", "bad", nil, 401, 2},
		{"invalid again is cached", "bad", nil, 401, 2},
		{"no token never reviewed", "", nil, 401, 2},
		{"review failure fails closed", "other", errors.New("apiserver down"), 503, 3},
		{"failures are not cached", "other", nil, 401, 4},
	}
	for _, s := range steps {
		rev.SetErr(s.reviewErr)
		code, body, _ := authRequest(t, client, router.URL, "", "sb", port, s.token)
		if code != s.wantCode {
			t.Fatalf("%s: code = %d, want %d (%s)", s.name, code, s.wantCode, body)
		}
		if s.wantCode == 200 && body != "auth=" {
			t.Fatalf("%s: Authorization forwarded: %q", s.name, body)
		}
		if got := rev.Calls(); got != s.wantCalls {
			t.Fatalf("%s: reviews = %d, want %d", s.name, got, s.wantCalls)
		}
	}
}

// With authorization on, the API server's answer for (caller, sandbox) decides: 403 for a known
// caller without the right, 401 without a token (never system:anonymous, whatever RBAC says of
// it), 503 when it cannot be asked.
func TestSandboxAuthorization(t *testing.T) {
	port := authUpstream(t)
	rev := &accesstest.TokenReviewer{Users: map[string]string{"alice-token": "alice", "bob-token": "bob"}}
	reviewer := &accesstest.SandboxReviewer{Grants: map[string]bool{
		"alice@team-a/sb":            true,
		"system:anonymous@public/sb": true,
	}}
	router := newRouter(t, routerOpts{
		resolver: &stubResolver{targets: map[string]Target{"team-a/sb": loopback, "team-b/sb": loopback, "public/sb": loopback}},
		guard: GuardOptions{
			Authenticator: access.NewTokenReviewAuthenticator(rev, time.Hour, 0, 16),
			Authorizer:    access.NewSandboxAuthorizer(reviewer, time.Hour, time.Hour, 0, 16),
		},
	})
	client := h1Client(t)
	cases := []struct {
		name       string
		ns, token  string
		wantCode   int
		wantDetail string
	}{
		{"allowed user in its namespace", "team-a", "alice-token", 200, ""},
		{"allowed user in another namespace", "team-b", "alice-token", 403, `User \"alice\" may not reach sandbox team-b/sb: it needs create on sandboxes/proxy in API group agents.x-k8s.io.`},
		{"user without any grant", "team-a", "bob-token", 403, `User \"bob\" may not reach sandbox team-a/sb`},
		{"no token, even where RBAC lets system:anonymous in", "public", "", 401, "Missing or malformed bearer token."},
		{"no token elsewhere", "team-a", "", 401, "Missing or malformed bearer token."},
		{"invalid token", "public", "nope", 401, "Invalid bearer token."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body, hdr := authRequest(t, client, router.URL, c.ns, "sb", port, c.token)
			if code != c.wantCode {
				t.Fatalf("code = %d, want %d (%s)", code, c.wantCode, body)
			}
			if c.wantDetail != "" && !strings.Contains(body, c.wantDetail) {
				t.Fatalf("body = %s, want it to contain %q", body, c.wantDetail)
			}
			if code == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}

	t.Run("malformed routing is a 400 before authorization", func(t *testing.T) {
		before := reviewer.Calls()
		code, body, _ := authRequest(t, client, router.URL, "Not_A_Namespace", "sb", port, "alice-token")
		if code != 400 || reviewer.Calls() != before {
			t.Fatalf("code = %d (%s), reviews %d -> %d; want 400 and no review", code, body, before, reviewer.Calls())
		}
	})
	t.Run("a review failure fails closed and is not cached", func(t *testing.T) {
		reviewer.SetErr(errors.New("apiserver down"))
		code, _, _ := authRequest(t, client, router.URL, "team-a", "other", port, "bob-token")
		reviewer.SetErr(nil)
		if code != 503 {
			t.Fatalf("code = %d, want 503", code)
		}
		if code, _, _ = authRequest(t, client, router.URL, "team-a", "other", port, "bob-token"); code != 403 {
			t.Fatalf("after recovery code = %d, want 403 (a fresh review)", code)
		}
	})
}
