package integration

import (
	"context"
	"fmt"
	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/routertoken"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// A claim annotated agents.x-k8s.io/router-token=true gets a Secret <claim>-router-token with a
// router token for its Sandbox alone, which ends no later than the claim's shutdownTime and goes
// away when the claim stops asking.
func TestClaimGetsARouterTokenScopedToItsSandbox(t *testing.T) {
	ns := newNamespace(t)
	shutdown := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	claim := testwrap.MakeClaim(ns, "with-token").Template("tmpl").
		Annotation(extv1alpha1.RouterTokenAnnotation, "true").ShutdownTime(shutdown).Obj()
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tmpl").Obj(), claim, testwrap.MakeClaim(ns, "without-token").Template("tmpl").Obj())

	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ns, Name: routertoken.SecretName("with-token")}
	testwrap.Eventually(t, "the token Secret exists", func() error {
		if err := k8s.Get(context.Background(), key, secret); err != nil {
			return err
		}
		return nil
	})
	sandbox := getClaim(t, ns, "with-token").Status.SandboxStatus.Name
	claims, err := scopedSigner.Verify(string(secret.Data[extv1alpha1.RouterTokenKeyToken]), time.Now())
	if err != nil {
		t.Fatalf("the minted token does not verify: %v", err)
	}
	if claims.Namespace != ns || claims.Name != sandbox || string(secret.Data[extv1alpha1.RouterTokenKeySandbox]) != sandbox {
		t.Errorf("token opens %s/%s (Secret says %q), want %s/%s", claims.Namespace, claims.Name, secret.Data[extv1alpha1.RouterTokenKeySandbox], ns, sandbox)
	}
	if got := time.Unix(claims.Expires, 0); !got.Equal(shutdown) {
		t.Errorf("token expires %s, want the claim's shutdownTime %s (earlier than the 24h validity)", got, shutdown)
	}
	owner := metav1.GetControllerOf(secret)
	if owner == nil || owner.Kind != "SandboxClaim" || owner.Name != "with-token" {
		t.Errorf("Secret controller = %+v, want the claim (deleted with it)", owner)
	}
	other := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: routertoken.SecretName("without-token")}, other); err == nil {
		t.Error("a claim that did not ask got a token Secret")
	}

	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, extv1alpha1.RouterTokenAnnotation))
	c := getClaim(t, ns, "with-token")
	if err := k8s.Patch(context.Background(), c, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "the Secret is removed once the claim stops asking", exists(secret, false))
}
