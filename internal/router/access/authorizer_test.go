package access

import (
	"context"
	"errors"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access/accesstest"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

func TestSandboxAuthorizerCachesPerUserAndSandbox(t *testing.T) {
	access := &accesstest.SandboxReviewer{Grants: map[string]bool{"alice@ns/a": true}}
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
		got, err := a.Authorize(ctx, s.id, "ns", s.sandbox)
		if err != nil || got != s.want || access.Calls() != s.wantCalls {
			t.Fatalf("%s: allowed=%v err=%v reviews=%d; want allowed=%v reviews=%d", s.name, got, err, access.Calls(), s.want, s.wantCalls)
		}
	}
}

func TestSharedAndScopedIdentitiesNeedNoReview(t *testing.T) {
	access := &accesstest.SandboxReviewer{}
	a := NewSandboxAuthorizer(access, time.Hour, time.Hour, 0, 4)
	scope := &scopedtoken.Claims{Namespace: "ns", Name: "mine", Expires: 1}
	cases := []struct {
		name               string
		id                 *Identity
		namespace, sandbox string
		want               bool
	}{
		{"shared token reaches anything", &Identity{Shared: true}, "x", "y", true},
		{"scoped token reaches its sandbox", &Identity{Scope: scope}, "ns", "mine", true},
		{"scoped token nothing else", &Identity{Scope: scope}, "ns", "yours", false},
		{"scoped token not the same name elsewhere", &Identity{Scope: scope}, "other", "mine", false},
	}
	for _, c := range cases {
		got, err := a.Authorize(context.Background(), c.id, c.namespace, c.sandbox)
		if err != nil || got != c.want {
			t.Errorf("%s: allowed=%v err=%v, want %v", c.name, got, err, c.want)
		}
	}
	if access.Calls() != 0 {
		t.Fatalf("reviews = %d, want 0", access.Calls())
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

func TestKubeSandboxReviewerAsksForTheProxySubresource(t *testing.T) {
	f := &fakeAccessReviews{status: authzv1.SubjectAccessReviewStatus{Allowed: true}}
	user := authnv1.UserInfo{Username: "alice", UID: "u1", Groups: []string{"g"}, Extra: map[string]authnv1.ExtraValue{"scopes": {"s"}}}
	ok, err := (&KubeSandboxReviewer{Client: f}).Review(context.Background(), user, "ns", "sb")
	if err != nil || !ok {
		t.Fatalf("allowed=%v err=%v", ok, err)
	}
	want := authzv1.ResourceAttributes{Namespace: "ns", Name: "sb", Verb: "create", Group: "agents.x-k8s.io", Resource: "sandboxes", Subresource: "proxy"}
	spec := f.got.Spec
	if *spec.ResourceAttributes != want || spec.User != "alice" || spec.UID != "u1" || spec.Groups[0] != "g" || spec.Extra["scopes"][0] != "s" {
		t.Fatalf("review sent %+v / %+v", spec, *spec.ResourceAttributes)
	}
	f.status = authzv1.SubjectAccessReviewStatus{Allowed: false, Denied: true}
	if ok, _ := (&KubeSandboxReviewer{Client: f}).Review(context.Background(), user, "ns", "sb"); ok {
		t.Fatal("a denied review allowed access")
	}
}

// Asked namespace-wide first, a caller allowed on every Sandbox of a namespace reaches each new
// one with no review of its own; one allowed on some names only is still asked name by name.
func TestANamespaceWideAllowStandsForEverySandboxOfTheNamespace(t *testing.T) {
	access := &accesstest.SandboxReviewer{Grants: map[string]bool{"bob@ns/": true, "alice@ns/a": true}}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	a := newSandboxAuthorizer(access, 10*time.Second, 2*time.Second, 0, 16, clk)
	AskNamespaceWideFirst()(a)
	bob := &Identity{User: authnv1.UserInfo{Username: "bob"}}
	alice := &Identity{User: authnv1.UserInfo{Username: "alice"}}
	steps := []struct {
		name               string
		id                 *Identity
		namespace, sandbox string
		advance            time.Duration
		want               bool
		wantCalls          int
	}{
		{"a namespace-wide right: one review for the namespace", bob, "ns", "a", 0, true, 1},
		{"and none for the next Sandbox there", bob, "ns", "b", 0, true, 1},
		{"another namespace is asked both ways", bob, "other", "a", 0, false, 3},
		{"a right on one name: the namespace, then the name", alice, "ns", "a", 0, true, 5},
		{"the namespace's no is remembered: only the name is asked", alice, "ns", "c", 0, false, 6},
		{"the namespace's yes expires with the allow TTL", bob, "ns", "c", 10*time.Second + time.Millisecond, true, 7},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		got, err := a.Authorize(context.Background(), s.id, s.namespace, s.sandbox)
		if err != nil || got != s.want || access.Calls() != s.wantCalls {
			t.Fatalf("%s: allowed=%v err=%v reviews=%d; want allowed=%v reviews=%d", s.name, got, err, access.Calls(), s.want, s.wantCalls)
		}
	}
}

// A namespace-wide review that fails is no answer: the Sandbox's own review decides, and the
// namespace is not asked again for the deny TTL.
func TestAFailedNamespaceWideReviewFallsBackToTheSandboxsOwn(t *testing.T) {
	access := &accesstest.SandboxReviewer{Grants: map[string]bool{"alice@ns/a": true}, Err: errors.New("apiserver busy"), ErrLeft: 1}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	a := newSandboxAuthorizer(access, 10*time.Second, 2*time.Second, 0, 16, clk)
	AskNamespaceWideFirst()(a)
	alice := &Identity{User: authnv1.UserInfo{Username: "alice"}}
	if ok, err := a.Authorize(context.Background(), alice, "ns", "a"); !ok || err != nil || access.Calls() != 2 {
		t.Fatalf("allowed=%v err=%v reviews=%d; want allowed after the failed namespace review and the Sandbox's (2)", ok, err, access.Calls())
	}
	if ok, err := a.Authorize(context.Background(), alice, "ns", "b"); ok || err != nil || access.Calls() != 3 {
		t.Fatalf("allowed=%v err=%v reviews=%d; want denied by the Sandbox's own review alone (3)", ok, err, access.Calls())
	}
}

// While the API server cannot answer, a recent namespace-wide allow stands for the Sandboxes it
// covered, as a Sandbox's own allow does: they were never asked about one by one.
func TestARecentNamespaceWideAllowOutlivesAnOutage(t *testing.T) {
	access := &accesstest.SandboxReviewer{Grants: map[string]bool{"bob@ns/": true}}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	a := newSandboxAuthorizer(access, 10*time.Second, 2*time.Second, time.Minute, 16, clk)
	a.retryBudget = 0
	AskNamespaceWideFirst()(a)
	bob := &Identity{User: authnv1.UserInfo{Username: "bob"}}
	if ok, err := a.Authorize(context.Background(), bob, "ns", "a"); !ok || err != nil {
		t.Fatalf("before the outage: allowed=%v err=%v, want allowed", ok, err)
	}
	clk.Step(11 * time.Second) // the cached allow has expired
	access.SetErr(errors.New("connection refused"))
	if ok, err := a.Authorize(context.Background(), bob, "ns", "b"); !ok || err != nil {
		t.Fatalf("during the outage: allowed=%v err=%v; want the namespace's recent allow to stand", ok, err)
	}
}

// Without the option every Sandbox is its own question, as before.
func TestWithoutNamespaceWideEachSandboxIsAsked(t *testing.T) {
	access := &accesstest.SandboxReviewer{Grants: map[string]bool{"bob@ns/": true}}
	a := NewSandboxAuthorizer(access, time.Hour, time.Hour, 0, 16)
	bob := &Identity{User: authnv1.UserInfo{Username: "bob"}}
	for _, sb := range []string{"a", "b"} {
		if ok, err := a.Authorize(context.Background(), bob, "ns", sb); !ok || err != nil {
			t.Fatalf("%s: allowed=%v err=%v, want allowed", sb, ok, err)
		}
	}
	if access.Calls() != 2 {
		t.Fatalf("reviews = %d, want 2 (one per Sandbox)", access.Calls())
	}
}
