package bench

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
)

// benchCluster is what a single-controller scenario runs on: a fresh control plane, the
// controller built from the tree and started as its own process, and the load generator's
// client and cache.
type benchCluster struct {
	env  *testenv.Env
	ctrl *controllerProc
	c    client.Client
	cc   cache.Cache
}

// startBenchCluster starts the control plane opts describes (its DataDir holds the logs and the
// controller's build) and the controller with memoryLimit ("" for none). On an error nothing is
// left running.
func startBenchCluster(ctx context.Context, opts testenv.Options, repoRoot, memoryLimit string) (*benchCluster, error) {
	env, err := testenv.Start(opts)
	if err != nil {
		return nil, err
	}
	b := &benchCluster{env: env}
	kubeconfig, err := env.Kubeconfig("agent-sandbox-controller")
	if err == nil {
		logf("building and starting the controller")
		b.ctrl, err = startController(ctx, repoRoot, opts.DataDir, kubeconfig, memoryLimit)
	}
	if err == nil {
		b.c, b.cc, err = loadgenClient(env)
	}
	if err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

// stop stops the controller, then the control plane.
func (b *benchCluster) stop() {
	if b.ctrl != nil {
		b.ctrl.stop()
	}
	_ = b.env.Stop()
}
