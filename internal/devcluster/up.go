package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/components"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/step"
)

// Cluster describes a running dev cluster.
type Cluster struct {
	Dir        string
	Kubeconfig string
	RouterURL  string
	// E2BURL is the router's E2B port (E2B_API_URL and E2B_SANDBOX_URL); "" with host processes.
	E2BURL string
	// RouterToken is a bearer token the router accepts from the host (a ServiceAccount's, bound
	// to agent-sandbox-user cluster-wide); it is also in RouterTokenFile.
	RouterToken     string
	RouterTokenFile string
	// Reused is set when every component was already running.
	Reused bool
}

// Up brings the cluster up, or completes and reuses one that is (partly) running. It is safe to
// call repeatedly: running components are kept, our own binaries are rebuilt and a component
// whose binary changed is restarted.
func Up(ctx context.Context, cfg spec.Config) (*Cluster, error) {
	cc, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the dev cluster runs containerd and a kubelet: run as root")
	}
	start := time.Now()
	if _, err := cc.ResolveRepoRoot(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cc.Dir, 0o755); err != nil {
		return nil, err
	}
	env := components.NewEnv(cc)
	wasRunning := components.AllRunning(env)
	if env.Bins, err = components.EnsureBinaries(ctx, env); err != nil {
		return nil, fmt.Errorf("binaries: %w", err)
	}
	if err := step.Up(ctx, components.Steps(env)); err != nil {
		return nil, err
	}
	token, err := os.ReadFile(cc.RouterTokenPath())
	if err != nil {
		return nil, err
	}
	cl := &Cluster{Dir: cc.Dir, Kubeconfig: cc.KubeconfigPath(), RouterURL: cc.RouterURL(), E2BURL: cc.E2BURL(), Reused: wasRunning,
		RouterToken: string(token), RouterTokenFile: cc.RouterTokenPath()}
	cc.Progress("cluster ready in %s", time.Since(start).Round(100*time.Millisecond))
	fmt.Fprintf(cc.Out, `
  export KUBECONFIG=%s
  kubectl get nodes            # (%s/kubectl is version-matched)
  router: %s  (X-Sandbox-ID: <sandbox name>, Authorization: Bearer <token>)
  export SBX_ROUTER=%s SBX_ROUTER_TOKEN=$(cat %s)   # for sbx
  export E2B_API_URL=%s E2B_SANDBOX_URL=%s   # for E2B's SDKs, with E2B_API_KEY (docs/e2b.md)
  stop and clean up: make dev-down (go run ./cmd/devcluster down)
`, cl.Kubeconfig, env.Bins.K8s, cl.RouterURL, cl.RouterURL, cl.RouterTokenFile, cl.E2BURL, cl.E2BURL)
	return cl, nil
}
