package routertoken

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/logtest"
)

// The mint is logged at V(2) with the Secret and the Sandbox it opens; the token, which opens
// the Sandbox to whoever holds it, never reaches the log at any verbosity.
func TestAMintIsLoggedWithoutTheToken(t *testing.T) {
	g := newRig(t, claim(shutdownIn(2*time.Hour)), sandboxObj(testUID))
	logger, rec := logtest.New(10)
	ctx := log.IntoContext(context.Background(), logger)
	if _, err := g.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: testClaim}}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	want := map[string]any{"secret": logtest.Ref(testNS, SecretName(testClaim)), "sandbox": logtest.Ref(testNS, testSandbox)}
	if err := rec.Check(2, "minted a router token", want); err != nil {
		t.Error(err)
	}
	token := string(g.secret().Data[extv1beta1.RouterTokenKeyToken])
	if token == "" {
		t.Fatal("the Secret holds no token")
	}
	if strings.Contains(rec.Text(), token) || strings.Contains(rec.Text(), string(testSecret)) {
		t.Fatalf("the token or its signing secret reached the log:\n%s", rec.Text())
	}
}
