package access

import (
	"context"
	"errors"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access/accesstest"
)

func TestTokenReviewCacheTTLAndBound(t *testing.T) {
	rev := &accesstest.TokenReviewer{Users: map[string]string{"a": "a", "b": "b", "c": "c"}}
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
	if rev.Calls() != 1 {
		t.Fatalf("reviews = %d, want 1", rev.Calls())
	}
	clk.Step(30*time.Second + time.Millisecond) // just past ttl
	mustOK("a")
	if rev.Calls() != 2 {
		t.Fatalf("reviews after ttl = %d, want 2", rev.Calls())
	}
	mustOK("b")
	mustOK("c")
	if n := c.len(); n != 2 {
		t.Fatalf("cache holds %d, want bound 2", n)
	}
	// "a" was least recently used and was evicted.
	before := rev.Calls()
	mustOK("c")
	mustOK("a")
	if rev.Calls() != before+1 {
		t.Fatalf("reviews = %d, want %d (only the evicted token reviewed again)", rev.Calls(), before+1)
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
