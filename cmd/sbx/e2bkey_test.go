package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// whoIs is the user the API server takes token for, or an error when it takes it for nobody.
func whoIs(t *testing.T, token string) (string, error) {
	t.Helper()
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

// A key is its ServiceAccount's token with E2B's prefix, bound to the key role in the
// namespace; a second create of the same key is refused; revoking it deletes the Secret, and
// the API server stops taking the token.
func TestE2BKeyCreateAndRevoke(t *testing.T) {
	c := newCLI(t)
	r := c.mustRun("", "e2b-key", "create", "agent")
	key := strings.TrimSpace(r.stdout)
	token, ok := strings.CutPrefix(key, "e2b_")
	if !ok || token == "" {
		t.Fatalf("stdout %q, want the key e2b_<token> alone", r.stdout)
	}
	user, err := whoIs(t, token)
	if want := "system:serviceaccount:" + c.ns + ":agent"; err != nil || user != want {
		t.Fatalf("the key's token is %q (%v), want %s", user, err, want)
	}
	rb := &rbacv1.RoleBinding{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: "agent-e2b-key"}, rb); err != nil ||
		rb.RoleRef.Name != e2bKeyRole || rb.Subjects[0].Name != "agent" {
		t.Errorf("RoleBinding %+v (%v), want agent bound to %s", rb.RoleRef, err, e2bKeyRole)
	}

	if again := c.run("", "e2b-key", "create", "agent"); again.code == 0 || !strings.Contains(again.stderr, "revoke that key first") {
		t.Errorf("a second create: exit %d, stderr %q; want a refusal naming revoke", again.code, again.stderr)
	}

	c.mustRun("", "e2b-key", "revoke", "agent")
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: "agent-e2b-key"}, &corev1.Secret{}); err == nil {
		t.Error("the key Secret is still there after revoke")
	}
	// The API server looks the Secret up through its informer: it stops taking the token once
	// its cache has seen the delete.
	testwrap.Eventually(t, "the revoked key refused", func() error {
		if user, err := whoIs(t, token); err == nil {
			return fmt.Errorf("the revoked key still authenticates as %q", user)
		}
		return nil
	})
}

// --bind=false makes the key and leaves RBAC to its owner.
func TestE2BKeyWithoutBinding(t *testing.T) {
	c := newCLI(t)
	c.mustRun("", "e2b-key", "create", "bare", "--bind=false")
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: "bare-e2b-key"}, &rbacv1.RoleBinding{})
	if err == nil {
		t.Error("a RoleBinding was made with --bind=false")
	}
}
