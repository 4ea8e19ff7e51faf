package router

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

var e2bNow = time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)

func e2bSigner(t *testing.T) *scopedtoken.Signer {
	t.Helper()
	s, err := scopedtoken.NewSigner([]byte(strings.Repeat("e", scopedtoken.MinSecretLen)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mintFor(t *testing.T, s *scopedtoken.Signer, ns, name string, expires time.Time) string {
	t.Helper()
	tok, err := s.Mint(scopedtoken.Claims{Namespace: ns, Name: name, UID: "uid-" + name, Expires: expires.Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// An envd request is turned into the router's own headers: the sandbox from E2b-Sandbox-Id,
// the namespace from the verified token, the port from E2b-Sandbox-Port or envd's, the token
// as the bearer; whatever the caller sent in their place is replaced, and the token itself is
// not passed on to the sandbox.
func TestE2BHeadersBecomeTheRoutersOwn(t *testing.T) {
	signer := e2bSigner(t)
	good := mintFor(t, signer, "team-a", "sb1", e2bNow.Add(time.Hour))
	tests := []struct {
		name     string
		headers  map[string][]string
		wantCode int
		wantMsg  string
		want     map[string]string // routed headers, when wantCode is 0
	}{
		{name: "envd's port by default", headers: map[string][]string{"E2b-Sandbox-Id": {"sb1"}, "X-Access-Token": {good}},
			want: map[string]string{"X-Sandbox-Id": "sb1", "X-Sandbox-Namespace": "team-a", "X-Sandbox-Port": "49983", "Authorization": "Bearer " + good}},
		{name: "another port of the sandbox", headers: map[string][]string{"E2b-Sandbox-Id": {"sb1"}, "E2b-Sandbox-Port": {"3000"}, "X-Access-Token": {good}},
			want: map[string]string{"X-Sandbox-Port": "3000"}},
		{name: "the caller's own routing headers and Basic user are replaced",
			headers: map[string][]string{"E2b-Sandbox-Id": {"sb1"}, "X-Access-Token": {good}, "X-Sandbox-Namespace": {"team-b"},
				"X-Sandbox-Id": {"x", "y"}, "Authorization": {"Basic dXNlcjo="}},
			want: map[string]string{"X-Sandbox-Id": "sb1", "X-Sandbox-Namespace": "team-a", "Authorization": "Bearer " + good}},
		{name: "no token", headers: map[string][]string{"E2b-Sandbox-Id": {"sb1"}}, wantCode: 401, wantMsg: "X-Access-Token is required"},
		{name: "a forged token", headers: map[string][]string{"E2b-Sandbox-Id": {"sb1"}, "X-Access-Token": {good + "x"}}, wantCode: 401, wantMsg: "Invalid access token."},
		{name: "an expired token", headers: map[string][]string{"E2b-Sandbox-Id": {"sb1"},
			"X-Access-Token": {mintFor(t, signer, "team-a", "sb1", e2bNow.Add(-time.Second))}}, wantCode: 401, wantMsg: "has expired"},
		{name: "the sandbox named twice", headers: map[string][]string{"E2b-Sandbox-Id": {"sb1", "sb2"}, "X-Access-Token": {good}}, wantCode: 400, wantMsg: "E2b-Sandbox-Id must be sent once"},
		{name: "an empty sandbox id", headers: map[string][]string{"E2b-Sandbox-Id": {""}, "X-Access-Token": {good}}, wantCode: 400, wantMsg: "E2b-Sandbox-Id must be sent once"},
		{name: "a port that is no number", headers: map[string][]string{"E2b-Sandbox-Id": {"sb1"}, "E2b-Sandbox-Port": {"49983x"}, "X-Access-Token": {good}}, wantCode: 400, wantMsg: "E2b-Sandbox-Port"},
		{name: "the code interpreter's Jupyter port", headers: map[string][]string{"E2b-Sandbox-Id": {"sb1"}, "E2b-Sandbox-Port": {"49999"}, "X-Access-Token": {good}},
			wantCode: 501, wantMsg: "run code with commands.run"},
		{name: "port zero", headers: map[string][]string{"E2b-Sandbox-Id": {"sb1"}, "E2b-Sandbox-Port": {"0"}, "X-Access-Token": {good}}, wantCode: 400, wantMsg: "E2b-Sandbox-Port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/process.Process/Start", nil)
			for k, vs := range tt.headers {
				r.Header[k] = vs
			}
			code, msg := translateE2B(r, signer, e2bNow)
			if code != tt.wantCode || !strings.Contains(msg, tt.wantMsg) {
				t.Fatalf("translate = %d %q, want %d containing %q", code, msg, tt.wantCode, tt.wantMsg)
			}
			if code != 0 {
				return
			}
			for k, v := range tt.want {
				if got := r.Header.Values(k); !slices.Equal(got, []string{v}) {
					t.Errorf("%s = %q, want exactly %q", k, got, v)
				}
			}
			if got := r.Header.Values("X-Access-Token"); len(got) != 0 {
				t.Errorf("X-Access-Token %q is passed on; want it dropped", got)
			}
		})
	}
}

// Through the whole E2B port: the token opens its own sandbox on envd's port and no other
// sandbox; requests that name no sandbox reach the control plane; refusals are E2B-shaped.
func TestTheE2BPortRoutesEnvdByTheAccessToken(t *testing.T) {
	var seen http.Header
	_, portStr := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		_, _ = io.WriteString(w, "envd")
	}))
	port := mustPort(t, portStr)
	signer := e2bSigner(t)
	cache := NewSandboxCache(true)
	cache.OnAdd(routable("sb1", "uid-sb1", port), true)
	cache.OnAdd(routable("sb2", "uid-sb2", port), true)
	guard := GuardOptions{Authenticator: access.NewScopedTokenAuthenticator(signer, nil), Authorizer: access.NewSandboxAuthorizer(nil, 0, 0, 0, 1)}
	proxy := NewProxy(e2bProxyOptions(ProxyOptions{Resolver: cache, DeclaredPortsOnly: true}))
	controlPlane := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "control plane") })
	srv := httptest.NewServer(NewE2BHandler(E2BOptions{Signer: signer, ControlPlane: controlPlane,
		Routed: NewHandler(HandlerOptions{Proxy: proxy, Guard: guard})}))
	t.Cleanup(func() {
		srv.Close()
		proxy.Close()
	})
	token := mintFor(t, signer, DefaultNamespace, "sb1", time.Now().Add(time.Hour))
	tests := []struct {
		name     string
		id       string
		wantCode int
		want     string
	}{
		{"its own sandbox", "sb1", 200, "envd"},
		{"another sandbox", "sb2", 403, `{"detail":"This token opens sandbox default/sb1 only, not default/sb2."}`},
		{"no sandbox named: the control plane", "", 200, "control plane"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen = nil
			req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, srv.URL+"/files?path=a", nil)
			if tt.id != "" {
				req.Header.Set("E2b-Sandbox-Id", tt.id)
				req.Header.Set("E2b-Sandbox-Port", strconv.Itoa(int(port)))
				req.Header.Set("X-Access-Token", token)
			}
			resp, err := h1Client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(readAll(t, resp)); resp.StatusCode != tt.wantCode || got != tt.want {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, got, tt.wantCode, tt.want)
			}
			if seen != nil && (seen.Get("X-Access-Token") != "" || seen.Get("Authorization") != "") {
				t.Errorf("the sandbox received the caller's credential: X-Access-Token %q, Authorization %q", seen.Get("X-Access-Token"), seen.Get("Authorization"))
			}
		})
	}
}

// The E2B port routes to envd's port on every Sandbox and gives it the claim's session env, as
// sandboxd's other ports; the main port's options are left as they were.
func TestTheE2BPortAddsEnvdsPortToSandboxds(t *testing.T) {
	main := ProxyOptions{AllowedPorts: []uint16{8888}}
	got := e2bProxyOptions(main)
	if !slices.Equal(got.AllowedPorts, []uint16{8888, E2BEnvdPort}) {
		t.Errorf("allowed ports %v, want 8888 and envd's", got.AllowedPorts)
	}
	if !slices.Equal(got.SandboxdPorts, append(slices.Clone(DefaultAllowedPorts), E2BEnvdPort)) {
		t.Errorf("sandboxd ports %v, want the defaults and envd's", got.SandboxdPorts)
	}
	if !slices.Equal(main.AllowedPorts, []uint16{8888}) || main.SandboxdPorts != nil {
		t.Errorf("the main port's options changed to %v / %v", main.AllowedPorts, main.SandboxdPorts)
	}
}
