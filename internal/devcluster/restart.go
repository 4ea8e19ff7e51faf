package devcluster

import (
	"context"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/components"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// Restart stops one component of a running cluster, SIGKILLed when kill is set (a crash) or
// else stopped as `down` stops it, starts it again exactly as `up` does and waits until it is
// ready. It returns how long the component was away, from the signal to ready. The components
// it restarts are components.Restartable: the node's and the control plane's, whose restarts
// the fault tests inflict on a running cluster.
func Restart(ctx context.Context, cfg spec.Config, name string, kill bool) (time.Duration, error) {
	cc, err := cfg.WithDefaults()
	if err != nil {
		return 0, err
	}
	return components.Restart(ctx, components.NewEnv(cc), name, kill)
}
