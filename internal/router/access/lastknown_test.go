package access

import (
	"context"
	"errors"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access/accesstest"
)

// connRefused is what client-go returns while kube-apiserver restarts.
var connRefused = &url.Error{Op: "Post", URL: "https://10.96.0.1:443/apis", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}

// errRouterForbidden is a just-restarted kube-apiserver's answer to the router's own review.
var errRouterForbidden = apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "",
	errors.New(`user "system:serviceaccount:agent-sandbox-system:sandbox-router" cannot create resource`))

// errBodyCut is client-go's error for an answer whose connection broke mid-body.
var errBodyCut = errors.New("unexpected error when reading response body. Please retry. Original error: http2: client connection force closed via ClientConn.Close")

// During an API server outage the router keeps serving whom it served, and no one else.
func TestLastKnownAnswersOnlyWhileTheAPIServerCannot(t *testing.T) {
	cases := []struct {
		name      string
		sandbox   string        // alice is allowed into "mine", not "theirs"
		revoked   bool          // a later review, before the outage, refused her
		after     time.Duration // since the last successful review
		reviewErr error
		want      bool
		wantErr   bool
	}{
		{"an allowance outlives its cache while the API server is refusing connections", "mine", false, 11 * time.Second, connRefused, true, false},
		{"and while it answers 503", "mine", false, time.Minute, apierrors.NewServiceUnavailable("etcd restarting"), true, false},
		{"and while etcd times out", "mine", false, time.Minute, apierrors.NewTimeoutError("etcdserver: request timed out", 1), true, false},
		{"but not past the stale ttl", "mine", false, 5*time.Minute + time.Second, connRefused, false, true},
		{"a refusal is never kept: the question fails closed", "theirs", false, 11 * time.Second, connRefused, false, true},
		{"an allowance refused since is forgotten", "mine", true, 11 * time.Second, connRefused, false, true},
		{"and while a restarted API server refuses the router's own review (RBAC still loading)", "mine", false, 11 * time.Second, errRouterForbidden, true, false},
		{"and when the answer's body was cut", "mine", false, 11 * time.Second, errBodyCut, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			access := &accesstest.SandboxReviewer{Grants: map[string]bool{"alice@ns/mine": true}}
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			a := newSandboxAuthorizer(access, 10*time.Second, 2*time.Second, 5*time.Minute, 16, clk)
			a.retryBudget = 0 // retryTransient has its own test
			alice := &Identity{User: authnv1.UserInfo{Username: "alice"}}
			if _, err := a.Authorize(context.Background(), alice, "ns", tc.sandbox); err != nil {
				t.Fatalf("first review: %v", err)
			}
			if tc.revoked {
				access.Revoke("alice@ns/" + tc.sandbox)
				clk.Step(11 * time.Second)
				if ok, err := a.Authorize(context.Background(), alice, "ns", tc.sandbox); ok || err != nil {
					t.Fatalf("after the revocation: allowed=%v err=%v, want a refusal", ok, err)
				}
			}
			clk.Step(tc.after)
			access.SetErr(tc.reviewErr)
			got, err := a.Authorize(context.Background(), alice, "ns", tc.sandbox)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("allowed=%v err=%v; want allowed=%v, error %v", got, err, tc.want, tc.wantErr)
			}
			access.SetErr(nil)
			if tc.want && tc.sandbox == "mine" {
				// Once the API server answers again, it is asked again.
				before := access.Calls()
				if _, err := a.Authorize(context.Background(), alice, "ns", tc.sandbox); err != nil || access.Calls() != before+1 {
					t.Fatalf("after the outage: err=%v, reviews %d → %d; want a fresh review", err, before, access.Calls())
				}
			}
		})
	}
}

func TestLastKnownTokenUsersOnlyWhileTheAPIServerCannot(t *testing.T) {
	cases := []struct {
		name      string
		token     string
		after     time.Duration
		reviewErr error
		wantUser  string
	}{
		{"a token's user outlives the cache while the API server is away", "alice-token", 31 * time.Second, connRefused, "alice"},
		{"not past the stale ttl", "alice-token", 5*time.Minute + time.Second, connRefused, ""},
		{"a token that was refused stays refused", "bad-token", 31 * time.Second, connRefused, ""},
		{"a token never seen fails closed", "new-token", 31 * time.Second, connRefused, ""},
		{"a token refused since is forgotten", "revoked-token", 31 * time.Second, connRefused, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rev := &accesstest.TokenReviewer{Users: map[string]string{"alice-token": "alice", "revoked-token": "bob"}}
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			c := newCachedReviewer(rev, 30*time.Second, 5*time.Minute, 16, clk)
			c.retryBudget = 0
			for _, tok := range []string{"alice-token", "bad-token", "revoked-token"} {
				_, _ = c.Authenticate(context.Background(), tok)
			}
			// bob's token is revoked and reviewed again before the outage.
			rev.Forget("revoked-token")
			clk.Step(31 * time.Second)
			if _, err := c.Authenticate(context.Background(), "revoked-token"); err == nil {
				t.Fatal("the revoked token was accepted while the API server answers")
			}
			clk.Step(tc.after - 31*time.Second)
			rev.SetErr(tc.reviewErr)
			id, err := c.Authenticate(context.Background(), tc.token)
			switch {
			case tc.wantUser == "" && err == nil:
				t.Fatalf("accepted as %q, want an error", id.User.Username)
			case tc.wantUser != "" && (err != nil || id.User.Username != tc.wantUser):
				t.Fatalf("identity %v err %v, want %s", id, err, tc.wantUser)
			}
		})
	}
}

// A caller the router has no last good answer for waits out a short outage instead of failing,
// and only a short one.
func TestAReviewThatFailsTransientlyIsAskedAgainForAnUnknownCaller(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		failures  int // before the API server answers
		budget    time.Duration
		want      bool
		wantCalls int
	}{
		{"a refused connection, twice: answered on the third try", connRefused, 2, 5 * time.Second, true, 3},
		{"a body cut short: asked again", errBodyCut, 1, 5 * time.Second, true, 2},
		{"an etcd timeout: asked again", apierrors.NewTimeoutError("etcdserver: request timed out", 1), 1, 5 * time.Second, true, 2},
		{"the router's own review refused: not a passing failure, asked once", errRouterForbidden, 1, 5 * time.Second, false, 1},
		{"an outage longer than the budget: fails closed", connRefused, 100, 250 * time.Millisecond, false, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			access := &accesstest.SandboxReviewer{Grants: map[string]bool{"alice@ns/mine": true}, Err: tc.err, ErrLeft: tc.failures}
			a := newSandboxAuthorizer(access, 10*time.Second, 2*time.Second, 5*time.Minute, 16, clocktesting.NewFakeClock(time.Unix(1000, 0)))
			a.retryBudget = tc.budget
			got, err := a.Authorize(context.Background(), &Identity{User: authnv1.UserInfo{Username: "alice"}}, "ns", "mine")
			if got != tc.want || (err == nil) != tc.want || access.Calls() != tc.wantCalls {
				t.Fatalf("allowed=%v err=%v after %d reviews; want allowed=%v after %d", got, err, access.Calls(), tc.want, tc.wantCalls)
			}
		})
	}
}
