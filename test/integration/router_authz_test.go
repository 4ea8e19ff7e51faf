package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
)

// shippedClientRole creates the named ClusterRole from config/rbac/client_roles.yaml (the
// kustomize install; the chart's copy is rendered from the same rules) for the test's duration.
func shippedClientRole(t *testing.T, name string) {
	t.Helper()
	for _, o := range decodeObjects(t, mustRead(t, filepath.Join(repoRoot, "config/rbac/client_roles.yaml"))) {
		if o.GetName() != name {
			continue
		}
		if err := k8s.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
		return
	}
	t.Fatalf("no ClusterRole %s in config/rbac/client_roles.yaml", name)
}

// everywhere resolves every sandbox to one local server, so that only the guard decides.
type everywhere struct{}

func (everywhere) Resolve(string, string) (router.Target, error) {
	return router.Target{Addr: netip.MustParseAddr("127.0.0.1")}, nil
}

// The router asks the real API server who a token belongs to (TokenReview) and whether that
// identity may reach the routed Sandbox (SubjectAccessReview on sandboxes/proxy), so ordinary
// RBAC decides, per namespace or per Sandbox name.
func TestRouterAuthorizesCallersWithTheAPIServer(t *testing.T) {
	allowed, other := newNamespace(t), newNamespace(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	token := func(ns, sa string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	agent := token(allowed, "agent")
	stranger := token(allowed, "stranger")
	// The agent is bound to the ClusterRole the install ships for sandbox users.
	shippedClientRole(t, "agent-sandbox-user")
	mustCreateObj(t,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: allowed, Name: "agent-proxy"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agent-sandbox-user"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: allowed, Name: "agent"}}},
		// A binding that opens one sandbox to system:unauthenticated: the router never uses it.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: allowed, Name: "public-proxy"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{access.ProxyGroup}, Resources: []string{"sandboxes/proxy"},
			Verbs: []string{"create"}, ResourceNames: []string{"public"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: allowed, Name: "public-proxy"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "public-proxy"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:unauthenticated"}}},
	)

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "reached")
	}))
	t.Cleanup(upstream.Close)
	_, port, _ := net.SplitHostPort(upstream.Listener.Addr().String())
	proxy := router.NewProxy(router.ProxyOptions{Resolver: everywhere{}})
	t.Cleanup(proxy.Close)
	front := httptest.NewServer(router.NewHandler(router.HandlerOptions{Proxy: proxy, Guard: router.GuardOptions{
		Authenticator: access.NewTokenReviewAuthenticator(&access.KubeTokenReviewer{Client: cs.AuthenticationV1().TokenReviews()}, time.Minute, 0, 16),
		Authorizer:    access.NewSandboxAuthorizer(&access.KubeSandboxReviewer{Client: cs.AuthorizationV1().SubjectAccessReviews()}, time.Second, 0, 0, 16),
	}}))
	t.Cleanup(front.Close)

	cases := []struct {
		name, token, ns, sandbox string
		wantCode                 int
		wantDetail               string
	}{
		{"a bound service account in its namespace", agent, allowed, "any", 200, ""},
		{"the same account elsewhere", agent, other, "any", 403, "may not reach sandbox " + other + "/any"},
		{"an account without a binding", stranger, allowed, "any", 403, `User \"system:serviceaccount:` + allowed + `:stranger\" may not reach`},
		{"a forged token", "not-a-token", allowed, "any", 401, "Invalid bearer token."},
		{"no token, to the sandbox RBAC opens to system:unauthenticated", "", allowed, "public", 401, "Missing or malformed bearer token."},
		{"no token, to any other sandbox", "", allowed, "any", 401, "Missing or malformed bearer token."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, front.URL+"/", nil)
			req.Header.Set("X-Sandbox-ID", c.sandbox)
			req.Header.Set("X-Sandbox-Namespace", c.ns)
			req.Header.Set("X-Sandbox-Port", port)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != c.wantCode || !strings.Contains(string(body), c.wantDetail) {
				t.Fatalf("got %d %s, want %d containing %q", resp.StatusCode, body, c.wantCode, c.wantDetail)
			}
		})
	}
}
