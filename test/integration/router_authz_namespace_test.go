package integration

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// countedReviews counts the SubjectAccessReviews sent to the real API server.
type countedReviews struct {
	authzv1client.SubjectAccessReviewInterface
	n atomic.Int32
}

func (c *countedReviews) Create(ctx context.Context, r *authzv1.SubjectAccessReview, o metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	c.n.Add(1)
	return c.SubjectAccessReviewInterface.Create(ctx, r, o)
}

// Asked namespace-wide first, the real API server's RBAC answers yes only for a right on every
// Sandbox of the namespace: the shipped user role then covers each new Sandbox with no review
// of its own, and a Role limited to some names is never widened by it.
func TestNamespaceWideReviewsFollowRBAC(t *testing.T) {
	ns := newNamespace(t)
	shippedClientRole(t, "agent-sandbox-user")
	mustCreateObj(t,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agent-sandbox-user"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "agent"}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-sandbox"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{access.ProxyGroup}, Resources: []string{"sandboxes/proxy"}, Verbs: []string{"create"}, ResourceNames: []string{"one"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-sandbox"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "one-sandbox"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "narrow"}}},
	)
	sars := kubernetes.NewForConfigOrDie(env.Config).AuthorizationV1().SubjectAccessReviews()
	// RBAC learns of the bindings from its own watch: wait until it answers with them, so that
	// no step below caches an answer given before.
	for user, sandbox := range map[string]string{"agent": "", "narrow": "one"} {
		testwrap.Eventually(t, user+"'s binding in force", func() error {
			if ok, err := (&access.KubeSandboxReviewer{Client: sars}).Review(context.Background(), authnv1.UserInfo{Username: user}, ns, sandbox); err != nil || !ok {
				return fmt.Errorf("allowed=%v err=%v", ok, err)
			}
			return nil
		})
	}
	reviews := &countedReviews{SubjectAccessReviewInterface: sars}
	authz := access.NewSandboxAuthorizer(&access.KubeSandboxReviewer{Client: reviews}, time.Minute, time.Minute, 0, 64, access.AskNamespaceWideFirst())
	id := func(user string) *access.Identity { return &access.Identity{User: authnv1.UserInfo{Username: user}} }
	steps := []struct {
		name, user, sandbox string
		want                bool
		wantReviews         int32
	}{
		{"the user role, first Sandbox: one review, for the namespace", "agent", "first", true, 1},
		{"the user role, each new Sandbox after: none", "agent", "second", true, 1},
		{"a Role on one name: the namespace says no, the name yes", "narrow", "one", true, 3},
		{"a Role on one name is not widened to another", "narrow", "two", false, 4},
	}
	for _, s := range steps {
		got, err := authz.Authorize(context.Background(), id(s.user), ns, s.sandbox)
		if err != nil || got != s.want || reviews.n.Load() != s.wantReviews {
			t.Fatalf("%s: allowed=%v err=%v reviews=%d; want allowed=%v after %d reviews", s.name, got, err, reviews.n.Load(), s.want, s.wantReviews)
		}
	}
}
