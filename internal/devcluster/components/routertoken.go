package components

import (
	"context"
	"fmt"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// developerAccount is the ServiceAccount (manifests/cluster.yaml) whose token the host's
// clients send to the router: the router authorizes every request, and one from the host names
// no pod.
const developerAccount = "sbx-developer"

// routerTokenLifetime: a day of demos and test runs; every `dev up` writes a fresh one.
const routerTokenLifetime = 24 * 60 * 60

// RouterTokenPath is the file `dev up` writes the developer's router token to.
func RouterTokenPath(e Env) string { return e.Cfg.Path("router-token") }

// writeRouterToken requests a token of the developer's account and writes it, readable by root
// only, to RouterTokenPath.
func writeRouterToken(ctx context.Context, e Env) (string, error) {
	cl, err := kube.Client(e.Cfg.KubeconfigPath())
	if err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: spec.SystemNS, Name: developerAccount}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](routerTokenLifetime)}}
	if err := cl.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a router token of %s/%s: %w", spec.SystemNS, developerAccount, err)
	}
	if err := os.WriteFile(RouterTokenPath(e), []byte(tr.Status.Token), 0o600); err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// readyStep waits for CoreDNS and writes the developer's router token.
type readyStep struct{ env Env }

func (readyStep) Name() string { return "ready" }

func (s readyStep) Up(ctx context.Context) error {
	if err := waitDNS(ctx, s.env); err != nil {
		return err
	}
	_, err := writeRouterToken(ctx, s.env)
	return err
}

func (readyStep) Down(context.Context) error { return nil }
