//go:build e2e

package e2e

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// The integrators run under ServiceAccounts bound to the Roles their documentation shows, not as
// cluster admins: their flows run as those identities, so a permission our SDK or controller
// silently relies on fails here as it would fail for them.

var readVerbs = []string{"get", "list", "watch"}

// agentServerRole is the Python agent server's chart's namespaced Role, verbatim: patch on Sandboxes for the TTL,
// nothing on claims beyond the SDK's lifecycle.
var agentServerRole = []rbacv1.PolicyRule{
	{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes"}, Verbs: append(readVerbs, "patch")},
	{APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxclaims", "sandboxtemplates"}, Verbs: append(readVerbs, "create", "delete")},
}

// agentServerClusterRole is its startup validation's: get/list of exactly our three CRDs.
var agentServerClusterRole = []rbacv1.PolicyRule{{
	APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"},
	ResourceNames: []string{"sandboxes.agents.x-k8s.io", "sandboxclaims.extensions.agents.x-k8s.io", "sandboxtemplates.extensions.agents.x-k8s.io"},
}}

// taskWorkerRole is the task controller's worker's, exactly as its docs list it: create/delete/patch claims
// (no reading them: the SDK waits on the claim's Sandbox and reads a claim with an empty patch),
// read templates, warm pools and Sandboxes, port-forward to pods, read EndpointSlices.
var taskWorkerRole = []rbacv1.PolicyRule{
	{APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxclaims"}, Verbs: []string{"create", "delete", "patch"}},
	{APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxtemplates", "sandboxwarmpools"}, Verbs: readVerbs},
	{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes"}, Verbs: readVerbs},
	{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"create"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: readVerbs},
}

// asServiceAccount creates ServiceAccount name in ns, binds it to rules (a Role of ns) and
// clusterRules (a ClusterRole, deleted after the test), and returns a REST config that carries
// one of its tokens and nothing else of ours.
func asServiceAccount(t *testing.T, ns, name string, rules, clusterRules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	mustf(t, kube.Create(ctx, sa), "creating ServiceAccount %s/%s", ns, name)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
	mustf(t, kube.Create(ctx, role), "creating Role %s", name)
	mustf(t, kube.Create(ctx, binding), "creating RoleBinding %s", name)
	if len(clusterRules) > 0 {
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Rules: clusterRules}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name}}
		mustf(t, kube.Create(ctx, cr), "creating ClusterRole %s", cr.Name)
		mustf(t, kube.Create(ctx, crb), "creating ClusterRoleBinding %s", crb.Name)
		t.Cleanup(func() {
			_ = kube.Delete(t.Context(), crb)
			_ = kube.Delete(t.Context(), cr)
		})
	}
	tr, err := kcs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	mustf(t, err, "requesting a token of %s/%s", ns, name)
	cfg := rest.AnonymousClientConfig(restCfg)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst = 50, 100
	return cfg
}

// clientAs is a controller-runtime client under that identity.
func clientAs(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	cl, err := client.New(cfg, client.Options{Scheme: kube.Scheme()})
	mustf(t, err, "client")
	return cl
}

// sdkClientAs is an SDK client of ns under that identity that reaches sandboxes through the
// router, sending the identity's token there too (the host is no pod the router could name).
func sdkClientAs(t *testing.T, ns string, cfg *rest.Config) *sdk.Client {
	t.Helper()
	cli, err := sdk.New(sdk.Options{RESTConfig: cfg, Namespace: ns, RouterURL: cluster.RouterURL,
		RouterToken: cfg.BearerToken, Mode: sdk.ModeRouter})
	mustf(t, err, "sdk client")
	t.Cleanup(cli.Close)
	return cli
}

// grantProxy lets ServiceAccount ns/sa create sandboxes/proxy on the named Sandboxes of ns: the
// router's own right, for a pod that calls it without a token.
func grantProxy(t *testing.T, ns, sa string, sandboxes ...string) {
	t.Helper()
	name := "proxy-" + sa
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes/proxy"}, Verbs: []string{"create"}, ResourceNames: sandboxes}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
	mustf(t, kube.Create(t.Context(), role), "creating Role %s", name)
	mustf(t, kube.Create(t.Context(), binding), "creating RoleBinding %s", name)
}
