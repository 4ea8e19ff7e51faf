//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap/e2bsdk"
)

// e2bKeyRole is the ClusterRole the chart installs with the rights an E2B key needs.
const e2bKeyRole = "agent-sandbox-e2b-key"

// TestE2BSDKAgainstTheCluster runs E2B's unmodified JS SDK against the local cluster through
// the router's E2B port (testdata/e2b/cluster_flow.cjs): a sandbox from a warm pool, commands,
// files, timeout, list by metadata, pause and resume keeping a file on its volume, kill; and
// the attacks a tenant could try with its own key: a wrong key, a key without rights, another
// tenant's key on its sandbox, another tenant's access token on its envd. Each refusal has its
// control beside it (the same act by the holder of the right succeeds).
func TestE2BSDKAgainstTheCluster(t *testing.T) {
	if cluster.E2BURL == "" {
		t.Skip("the router runs on the host (host processes): it serves no E2B port")
	}
	sdkDir := e2bsdk.Install(t)
	nsA, nsB := newNamespace(t, "e2b-a"), newNamespace(t, "e2b-b")
	// E2B's create passes envVars, which a template must allow claims to inject; naming the
	// container that runs sandboxd lets them ride the warm path.
	tmplA := applyTemplate(t, templateFor(nsA, "agent", true).EnvInjection(extv1alpha1.EnvVarsInjectionPolicyAllowed).
		Annotation(extv1alpha1.SandboxdContainerAnnotation, "runtime"))
	tmplB := createTemplate(t, nsB, "agent", false)
	createPool(t, nsA, "agent", tmplA.Name, 1)
	createPool(t, nsB, "agent", tmplB.Name, 1)
	keyA, keyB := e2bKey(t, nsA, "agent", true), e2bKey(t, nsB, "agent", true)
	noRights := e2bKey(t, nsA, "nobody", false)

	res := e2bsdk.Run(t, sdkDir, "testdata/e2b/cluster_flow.cjs", 6*time.Minute, 25,
		"E2B_API_URL="+cluster.E2BURL, "E2B_SANDBOX_URL="+cluster.E2BURL, "E2B_DOMAIN=", "E2B_DEBUG=",
		"E2B_API_KEY="+keyA, "TEMPLATE="+tmplA.Name, "OTHER_KEY="+keyB, "OTHER_TEMPLATE="+tmplB.Name,
		"NO_RIGHTS_KEY="+noRights, "RUN="+rand.String(8))
	t.Logf("E2B SDK on the cluster: create %.0f ms, create to first command %.0f ms (one run; docs/e2b.md has percentiles)",
		res.Timings["create"], res.Timings["create to first command"])
}

// e2bKey makes an E2B API key of namespace ns: the token of ServiceAccount sa, from a
// long-lived token Secret as `kubectl create secret` or sbx would make it, with the key role
// bound in ns when withRights.
func e2bKey(t testing.TB, ns, sa string, withRights bool) string {
	t.Helper()
	ctx := t.Context()
	mustf(t, kube.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}), "creating ServiceAccount %s", sa)
	if withRights {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-e2b"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: e2bKeyRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		}
		mustf(t, kube.Create(ctx, rb), "binding %s", e2bKeyRole)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-e2b-key", Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
	mustf(t, kube.Create(ctx, secret), "creating the key Secret")
	var token string
	slow.EventuallyContext(t, "the key Secret's token", func(ctx context.Context) error {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			return err
		}
		token = string(secret.Data[corev1.ServiceAccountTokenKey])
		if token == "" {
			return errors.New("no token yet")
		}
		return nil
	})
	return fmt.Sprintf("e2b_%s", token)
}
