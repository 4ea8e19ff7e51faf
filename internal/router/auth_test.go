package router

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
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
	a, err := NewStaticTokenAuthenticator("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(nil)
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}},
		guard: GuardOptions{Authenticator: a, Authorizer: NewSandboxAuthorizer(nil, 0, 0, 0, 1)}, metrics: m})
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
	if _, err := NewStaticTokenAuthenticator(""); err == nil {
		t.Fatal("empty token accepted")
	}
}

// fakeReviewer knows the users of the tokens in users; err, when set, is returned instead.
type fakeReviewer struct {
	mu    sync.Mutex
	users map[string]string // token -> username
	err   error
	calls int
}

func (f *fakeReviewer) Review(_ context.Context, token string) (*authnv1.UserInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	name, ok := f.users[token]
	if !ok {
		return nil, nil
	}
	return &authnv1.UserInfo{Username: name, Groups: []string{"system:authenticated"}}, nil
}

func (f *fakeReviewer) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeReviewer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// fakeAccess allows the (user, namespace/name) pairs in grants, like RBAC would.
type fakeAccess struct {
	mu      sync.Mutex
	grants  map[string]bool // "user@ns/name"
	err     error
	errLeft int // when set, err is returned this many times, then answers
	calls   int
}

func (f *fakeAccess) Review(_ context.Context, u authnv1.UserInfo, ns, name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		err := f.err
		if f.errLeft > 0 {
			if f.errLeft--; f.errLeft == 0 {
				f.err = nil
			}
		}
		return false, err
	}
	return f.grants[u.Username+"@"+ns+"/"+name], nil
}

func (f *fakeAccess) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeAccess) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
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
	rev := &fakeReviewer{users: map[string]string{"good": "alice"}}
	router := newRouter(t, routerOpts{
		resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}},
		guard:    GuardOptions{Authenticator: NewTokenReviewAuthenticator(rev, time.Hour, 0, 16), Authorizer: NewSandboxAuthorizer(nil, 0, 0, 0, 1)},
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
		rev.setErr(s.reviewErr)
		code, body, _ := authRequest(t, client, router.URL, "", "sb", port, s.token)
		if code != s.wantCode {
			t.Fatalf("%s: code = %d, want %d (%s)", s.name, code, s.wantCode, body)
		}
		if s.wantCode == 200 && body != "auth=" {
			t.Fatalf("%s: Authorization forwarded: %q", s.name, body)
		}
		if got := rev.count(); got != s.wantCalls {
			t.Fatalf("%s: reviews = %d, want %d", s.name, got, s.wantCalls)
		}
	}
}

// With authorization on, the API server's answer for (caller, sandbox) decides: 403 for a known
// caller without the right, 401 without a token (never system:anonymous, whatever RBAC says of
// it), 503 when it cannot be asked.
func TestSandboxAuthorization(t *testing.T) {
	port := authUpstream(t)
	rev := &fakeReviewer{users: map[string]string{"alice-token": "alice", "bob-token": "bob"}}
	access := &fakeAccess{grants: map[string]bool{
		"alice@team-a/sb":            true,
		"system:anonymous@public/sb": true,
	}}
	router := newRouter(t, routerOpts{
		resolver: &stubResolver{targets: map[string]Target{"team-a/sb": loopback, "team-b/sb": loopback, "public/sb": loopback}},
		guard: GuardOptions{
			Authenticator: NewTokenReviewAuthenticator(rev, time.Hour, 0, 16),
			Authorizer:    NewSandboxAuthorizer(access, time.Hour, time.Hour, 0, 16),
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
		before := access.count()
		code, body, _ := authRequest(t, client, router.URL, "Not_A_Namespace", "sb", port, "alice-token")
		if code != 400 || access.count() != before {
			t.Fatalf("code = %d (%s), reviews %d -> %d; want 400 and no review", code, body, before, access.count())
		}
	})
	t.Run("a review failure fails closed and is not cached", func(t *testing.T) {
		access.setErr(errors.New("apiserver down"))
		code, _, _ := authRequest(t, client, router.URL, "team-a", "other", port, "bob-token")
		access.setErr(nil)
		if code != 503 {
			t.Fatalf("code = %d, want 503", code)
		}
		if code, _, _ = authRequest(t, client, router.URL, "team-a", "other", port, "bob-token"); code != 403 {
			t.Fatalf("after recovery code = %d, want 403 (a fresh review)", code)
		}
	})
}

func TestSandboxAuthorizerCachesPerUserAndSandbox(t *testing.T) {
	access := &fakeAccess{grants: map[string]bool{"alice@ns/a": true}}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	a := newSandboxAuthorizer(access, 10*time.Second, 2*time.Second, 0, 16, clk)
	alice := &Identity{User: authnv1.UserInfo{Username: "alice"}}
	aliceOtherGroups := &Identity{User: authnv1.UserInfo{Username: "alice", Groups: []string{"admins"}}}
	ctx := context.Background()
	steps := []struct {
		name      string
		id        *Identity
		sandbox   string
		advance   time.Duration
		want      bool
		wantCalls int
	}{
		{"first question is asked", alice, "a", 0, true, 1},
		{"same question is cached", alice, "a", 0, true, 1},
		{"another sandbox is another question", alice, "b", 0, false, 2},
		{"a denial is cached briefly", alice, "b", time.Second, false, 2},
		{"and asked again after its ttl", alice, "b", 2 * time.Second, false, 3},
		{"other groups are another identity", aliceOtherGroups, "a", 0, true, 4},
		{"an allowance expires after its ttl", alice, "a", 10*time.Second + time.Millisecond, true, 5},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		got, err := a.Authorize(ctx, s.id, Route{Namespace: "ns", Name: s.sandbox})
		if err != nil || got != s.want || access.count() != s.wantCalls {
			t.Fatalf("%s: allowed=%v err=%v reviews=%d; want allowed=%v reviews=%d", s.name, got, err, access.count(), s.want, s.wantCalls)
		}
	}
}

func TestSharedAndScopedIdentitiesNeedNoReview(t *testing.T) {
	access := &fakeAccess{}
	a := NewSandboxAuthorizer(access, time.Hour, time.Hour, 0, 4)
	scope := &ScopedClaims{Namespace: "ns", Name: "mine", Expires: 1}
	cases := []struct {
		name  string
		id    *Identity
		route Route
		want  bool
	}{
		{"shared token reaches anything", &Identity{Shared: true}, Route{Namespace: "x", Name: "y"}, true},
		{"scoped token reaches its sandbox", &Identity{Scope: scope}, Route{Namespace: "ns", Name: "mine", Port: 9}, true},
		{"scoped token nothing else", &Identity{Scope: scope}, Route{Namespace: "ns", Name: "yours"}, false},
		{"scoped token not the same name elsewhere", &Identity{Scope: scope}, Route{Namespace: "other", Name: "mine"}, false},
	}
	for _, c := range cases {
		got, err := a.Authorize(context.Background(), c.id, c.route)
		if err != nil || got != c.want {
			t.Errorf("%s: allowed=%v err=%v, want %v", c.name, got, err, c.want)
		}
	}
	if access.count() != 0 {
		t.Fatalf("reviews = %d, want 0", access.count())
	}
}

func TestTokenReviewCacheTTLAndBound(t *testing.T) {
	rev := &fakeReviewer{users: map[string]string{"a": "a", "b": "b", "c": "c"}}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := newCachedReviewer(rev, 30*time.Second, 0, 2, clk)
	ctx := context.Background()
	mustOK := func(tok string) {
		t.Helper()
		if _, err := c.Authenticate(ctx, tok); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
	}
	mustOK("a")
	mustOK("a")
	if rev.count() != 1 {
		t.Fatalf("reviews = %d, want 1", rev.count())
	}
	clk.Step(30*time.Second + time.Millisecond) // just past ttl
	mustOK("a")
	if rev.count() != 2 {
		t.Fatalf("reviews after ttl = %d, want 2", rev.count())
	}
	mustOK("b")
	mustOK("c")
	if n := c.len(); n != 2 {
		t.Fatalf("cache holds %d, want bound 2", n)
	}
	// "a" was least recently used and was evicted.
	before := rev.count()
	mustOK("c")
	mustOK("a")
	if rev.count() != before+1 {
		t.Fatalf("reviews = %d, want %d (only the evicted token reviewed again)", rev.count(), before+1)
	}
}

// fakeTokenReviews answers TokenReview creates like an API server would.
type fakeTokenReviews struct {
	status authnv1.TokenReviewStatus
	err    error
	got    *authnv1.TokenReview
}

func (f *fakeTokenReviews) Create(_ context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	f.got = tr
	if f.err != nil {
		return nil, f.err
	}
	out := tr.DeepCopy()
	out.Status = f.status
	return out, nil
}

func TestKubeTokenReviewer(t *testing.T) {
	alice := authnv1.UserInfo{Username: "alice"}
	tests := []struct {
		name      string
		audiences []string
		status    authnv1.TokenReviewStatus
		err       error
		wantUser  string
		wantErr   bool
	}{
		{"authenticated", nil, authnv1.TokenReviewStatus{Authenticated: true, User: alice}, nil, "alice", false},
		{"rejected", nil, authnv1.TokenReviewStatus{Authenticated: false}, nil, "", false},
		{"audience match", []string{"sandbox-router"}, authnv1.TokenReviewStatus{Authenticated: true, User: alice, Audiences: []string{"x", "sandbox-router"}}, nil, "alice", false},
		{"audience mismatch", []string{"sandbox-router"}, authnv1.TokenReviewStatus{Authenticated: true, User: alice, Audiences: []string{"api"}}, nil, "", false},
		{"api error", nil, authnv1.TokenReviewStatus{}, errors.New("forbidden"), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTokenReviews{status: tt.status, err: tt.err}
			k := &KubeTokenReviewer{Client: f, Audiences: tt.audiences}
			got, err := k.Review(context.Background(), "tok")
			gotUser := ""
			if got != nil {
				gotUser = got.Username
			}
			if (err != nil) != tt.wantErr || gotUser != tt.wantUser {
				t.Fatalf("got %q, %v; want %q, err %v", gotUser, err, tt.wantUser, tt.wantErr)
			}
			if f.got.Spec.Token != "tok" || len(f.got.Spec.Audiences) != len(tt.audiences) {
				t.Fatalf("review sent %+v", f.got.Spec)
			}
		})
	}
}

// fakeAccessReviews answers SubjectAccessReview creates like an API server would.
type fakeAccessReviews struct {
	status authzv1.SubjectAccessReviewStatus
	got    *authzv1.SubjectAccessReview
}

func (f *fakeAccessReviews) Create(_ context.Context, r *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	f.got = r
	out := r.DeepCopy()
	out.Status = f.status
	return out, nil
}

func TestKubeAccessReviewerAsksForTheProxySubresource(t *testing.T) {
	f := &fakeAccessReviews{status: authzv1.SubjectAccessReviewStatus{Allowed: true}}
	user := authnv1.UserInfo{Username: "alice", UID: "u1", Groups: []string{"g"}, Extra: map[string]authnv1.ExtraValue{"scopes": {"s"}}}
	ok, err := (&KubeAccessReviewer{Client: f}).Review(context.Background(), user, "ns", "sb")
	if err != nil || !ok {
		t.Fatalf("allowed=%v err=%v", ok, err)
	}
	want := authzv1.ResourceAttributes{Namespace: "ns", Name: "sb", Verb: "create", Group: "agents.x-k8s.io", Resource: "sandboxes", Subresource: "proxy"}
	spec := f.got.Spec
	if *spec.ResourceAttributes != want || spec.User != "alice" || spec.UID != "u1" || spec.Groups[0] != "g" || spec.Extra["scopes"][0] != "s" {
		t.Fatalf("review sent %+v / %+v", spec, *spec.ResourceAttributes)
	}
	f.status = authzv1.SubjectAccessReviewStatus{Allowed: false, Denied: true}
	if ok, _ := (&KubeAccessReviewer{Client: f}).Review(context.Background(), user, "ns", "sb"); ok {
		t.Fatal("a denied review allowed access")
	}
}
