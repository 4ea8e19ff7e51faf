package access

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access/accesstest"
)

// An allow in use is asked again in the background once it has lived half its TTL, so a
// caller who keeps sending requests never waits for a review, past the first answer's TTL
// too; a refusal the refresh brings replaces the allow; a caller silent for a whole TTL is
// asked again before it is let in.
func TestAnAllowInUseIsAskedAgainBeforeItExpires(t *testing.T) {
	grants := &accesstest.SandboxReviewer{Grants: map[string]bool{"bob@ns/": true, "alice@ns/": true}}
	rev := &gatedSandboxReviewer{inner: grants}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	a := newSandboxAuthorizer(rev, 10*time.Second, 2*time.Second, 0, 16, clk)
	AskNamespaceWideFirst()(a)
	bob := &Identity{User: authnv1.UserInfo{Username: "bob"}}
	alice := &Identity{User: authnv1.UserInfo{Username: "alice"}}
	authorize := func(id *Identity) bool {
		t.Helper()
		ok, err := a.Authorize(context.Background(), id, "ns", "a")
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	steps := []struct {
		name    string
		id      *Identity
		advance time.Duration
		gated   bool // reviews hang: the call must not wait for one
		revoke  string
		want    bool
		reviews int64 // reviews started once the background ones are over
	}{
		{"the first request is asked", bob, 0, false, "", true, 1},
		{"a young allow is only remembered", bob, 4 * time.Second, true, "", true, 1},
		{"past half its TTL it is asked again, in the background", bob, 2 * time.Second, true, "", true, 2},
		{"past the first answer's TTL the refreshed one stands", bob, 6 * time.Second, true, "", true, 3},
		{"a revocation still lets the allow finish its TTL", bob, 6 * time.Second, true, "bob@ns/", true, 4},
		{"and the refusal the refresh brought is the answer", bob, 0, false, "", false, 5},
		{"a caller silent for a whole TTL is asked first", alice, 0, false, "", true, 6},
		{"(then silent)", alice, 11 * time.Second, false, "", true, 7},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		if s.revoke != "" {
			grants.Revoke(s.revoke)
		}
		var got bool
		if s.gated {
			got = rev.whileHanging(t, func() bool { return authorize(s.id) })
		} else {
			got = authorize(s.id)
		}
		a.refresh.wait()
		if got != s.want || rev.started.Load() != s.reviews {
			t.Fatalf("%s: allowed=%v reviews=%d; want allowed=%v reviews=%d", s.name, got, rev.started.Load(), s.want, s.reviews)
		}
	}
}

// The same for a token's user; a refused token is not asked again in the background.
func TestATokenInUseIsAskedAgainBeforeItExpires(t *testing.T) {
	users := &accesstest.TokenReviewer{Users: map[string]string{"alice-token": "alice"}}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := newCachedReviewer(users, 30*time.Second, 0, 16, clk)
	steps := []struct {
		name    string
		token   string
		advance time.Duration
		forget  bool
		want    string // "" for refused
		reviews int
	}{
		{"the first request is asked", "alice-token", 0, false, "alice", 1},
		{"a young answer is only remembered", "alice-token", 10 * time.Second, false, "alice", 1},
		{"past half its TTL it is asked again, in the background", "alice-token", 6 * time.Second, false, "alice", 2},
		{"past the first answer's TTL the refreshed one stands", "alice-token", 16 * time.Second, false, "alice", 3},
		{"a revoked token finishes its TTL", "alice-token", 16 * time.Second, true, "alice", 4},
		{"and is refused from the refresh on", "alice-token", 0, false, "", 4},
		{"a refusal is not asked again before its TTL", "alice-token", 20 * time.Second, false, "", 4},
		{"an unknown token is asked once", "stranger", 0, false, "", 5},
		{"and not again in the background", "stranger", 20 * time.Second, false, "", 5},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		if s.forget {
			users.Forget(s.token)
		}
		id, err := c.Authenticate(context.Background(), s.token)
		c.refresh.wait()
		got := ""
		if err == nil {
			got = id.User.Username
		}
		if got != s.want || users.Calls() != s.reviews {
			t.Fatalf("%s: user=%q err=%v reviews=%d; want user=%q reviews=%d", s.name, got, err, users.Calls(), s.want, s.reviews)
		}
	}
}

// gatedSandboxReviewer answers as inner does, except that whileHanging makes every review
// wait until f has returned.
type gatedSandboxReviewer struct {
	inner   SandboxReviewer
	gate    sync.RWMutex
	started atomic.Int64
}

func (g *gatedSandboxReviewer) Review(ctx context.Context, u authnv1.UserInfo, ns, name string) (bool, error) {
	g.started.Add(1)
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.inner.Review(ctx, u, ns, name)
}

// whileHanging runs f while reviews hang, and fails the test if f waits for one.
func (g *gatedSandboxReviewer) whileHanging(t *testing.T, f func() bool) bool {
	t.Helper()
	g.gate.Lock()
	done := make(chan bool, 1)
	go func() { done <- f() }()
	select {
	case got := <-done:
		g.gate.Unlock()
		return got
	case <-time.After(5 * time.Second):
		g.gate.Unlock()
		<-done
		t.Fatal("the request waited for a review")
		return false
	}
}
