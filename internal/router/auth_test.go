package router

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}, auth: a, metrics: m})
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

// fakeReviewer accepts the tokens in valid; err, when set, is returned instead.
type fakeReviewer struct {
	mu    sync.Mutex
	valid map[string]bool
	err   error
	calls int
}

func (f *fakeReviewer) Review(_ context.Context, token string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return false, f.err
	}
	return f.valid[token], nil
}

func (f *fakeReviewer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestTokenReviewAuth(t *testing.T) {
	port := authUpstream(t)
	rev := &fakeReviewer{valid: map[string]bool{"good": true}}
	router := newRouter(t, routerOpts{
		resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}},
		auth:     NewTokenReviewAuthenticator(rev, time.Hour, 16),
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
		rev.mu.Lock()
		rev.err = s.reviewErr
		rev.mu.Unlock()
		req := routed(t, "GET", router.URL+"/", "sb", port, nil)
		if s.token != "" {
			req.Header.Set("Authorization", "Bearer "+s.token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != s.wantCode {
			t.Fatalf("%s: code = %d, want %d (%s)", s.name, resp.StatusCode, s.wantCode, body)
		}
		if s.wantCode == 200 && body != "auth=" {
			t.Fatalf("%s: Authorization forwarded: %q", s.name, body)
		}
		if got := rev.count(); got != s.wantCalls {
			t.Fatalf("%s: reviews = %d, want %d", s.name, got, s.wantCalls)
		}
	}
}

func TestTokenReviewCacheTTLAndBound(t *testing.T) {
	rev := &fakeReviewer{valid: map[string]bool{"a": true, "b": true, "c": true}}
	now := time.Unix(1000, 0)
	c := NewTokenReviewAuthenticator(rev, 30*time.Second, 2).(*cachedReviewer)
	c.now = func() time.Time { return now }
	ctx := context.Background()
	mustOK := func(tok string) {
		t.Helper()
		if err := c.Authenticate(ctx, tok); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
	}
	mustOK("a")
	mustOK("a")
	if rev.count() != 1 {
		t.Fatalf("reviews = %d, want 1", rev.count())
	}
	now = now.Add(30 * time.Second) // expired exactly at ttl
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
	tests := []struct {
		name      string
		audiences []string
		status    authnv1.TokenReviewStatus
		err       error
		want      bool
		wantErr   bool
	}{
		{"authenticated", nil, authnv1.TokenReviewStatus{Authenticated: true}, nil, true, false},
		{"rejected", nil, authnv1.TokenReviewStatus{Authenticated: false}, nil, false, false},
		{"audience match", []string{"sandbox-router"}, authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{"x", "sandbox-router"}}, nil, true, false},
		{"audience mismatch", []string{"sandbox-router"}, authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{"api"}}, nil, false, false},
		{"api error", nil, authnv1.TokenReviewStatus{}, errors.New("forbidden"), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTokenReviews{status: tt.status, err: tt.err}
			k := &KubeTokenReviewer{Client: f, Audiences: tt.audiences}
			got, err := k.Review(context.Background(), "tok")
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %v, %v; want %v, err %v", got, err, tt.want, tt.wantErr)
			}
			if f.got.Spec.Token != "tok" || len(f.got.Spec.Audiences) != len(tt.audiences) {
				t.Fatalf("review sent %+v", f.got.Spec)
			}
		})
	}
}
