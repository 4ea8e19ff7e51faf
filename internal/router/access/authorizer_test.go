package access

import (
	"context"
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
