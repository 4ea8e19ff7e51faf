package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/routertoken"
	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// A claim annotated agents.x-k8s.io/router-token=true gets a Secret <claim>-router-token with a
// router token for its Sandbox alone (that object, by UID), which ends no later than the claim's
// shutdownTime and goes away when the claim stops asking.
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
	if uid := string(getSandbox(t, ns, sandbox).UID); claims.UID != uid {
		t.Errorf("token binds uid %q, want the Sandbox's %q", claims.UID, uid)
	}
	if issued := time.Unix(claims.IssuedAt, 0); time.Since(issued) > time.Minute || time.Until(issued) > time.Minute {
		t.Errorf("token issued at %s, want about now", issued)
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

// A token outlives its claim only as a useless string: a later claim of the same name gets a
// Sandbox of the same name, and the old token does not open it.
func TestRouterTokenDoesNotOpenALaterSandboxOfTheSameName(t *testing.T) {
	ns := newNamespace(t)
	port := standIn(t, "reached")
	guard := router.GuardOptions{
		Authenticator: access.NewScopedTokenAuthenticator(scopedSigner, nil),
		Authorizer:    access.NewSandboxAuthorizer(nil, 0, 0, 0, 1),
	}
	url := startRouter(t, startRouterCache(t, ns), router.ProxyOptions{}, guard)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tmpl").Containers(runtimeOn(port)).Obj())
	// issue makes the claim, serves its (cold, same-named) Sandbox on loopback and returns the
	// token the controller minted for it, once the router lets it through.
	issue := func(what string) (string, scopedtoken.Claims) {
		t.Helper()
		mustCreateObj(t, testwrap.MakeClaim(ns, "c").Template("tmpl").Annotation(extv1alpha1.RouterTokenAnnotation, "true").Obj())
		setPodStatus(t, waitForPod(t, ns, "c"), running("127.0.0.1"))
		var tok string
		var claims scopedtoken.Claims
		testwrap.Eventually(t, what+": a token that opens the sandbox", func() error {
			s := &corev1.Secret{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: routertoken.SecretName("c")}, s); err != nil {
				return err
			}
			tok = string(s.Data[extv1alpha1.RouterTokenKeyToken])
			var err error
			if claims, err = scopedSigner.Verify(tok, time.Now()); err != nil {
				return err
			}
			if uid := string(getSandbox(t, ns, "c").UID); claims.UID != uid {
				return fmt.Errorf("token for uid %s, the Sandbox has %s", claims.UID, uid)
			}
			if code, body := routerCall(url, ns, "c", port, tok); code != http.StatusOK {
				return fmt.Errorf("router answered %d %q", code, body)
			}
			return nil
		})
		return tok, claims
	}

	oldToken, oldClaims := issue("the first claim")
	claim := getClaim(t, ns, "c")
	if err := k8s.Delete(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	// The pod goes last (garbage collection); a pod left from the first Sandbox would be taken for
	// the second one's.
	testwrap.Eventually(t, "the claim, its Sandbox and its pod are gone", func() error {
		if err := exists(claim, false)(); err != nil {
			return err
		}
		if err := exists(&agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}, false)(); err != nil {
			return err
		}
		return exists(podOf(ns, "c"), false)()
	})
	_, newClaims := issue("the second claim")
	if newClaims.UID == oldClaims.UID {
		t.Fatalf("both tokens bind uid %s, want the second Sandbox's own", newClaims.UID)
	}
	want := fmt.Sprintf("This token opens an earlier sandbox named %s/c, not the one that has the name now.", ns)
	if code, detail := routerCall(url, ns, "c", port, oldToken); code != http.StatusForbidden || detail != want {
		t.Fatalf("the first claim's token on the second Sandbox: %d %q, want 403 %q", code, detail, want)
	}
}
