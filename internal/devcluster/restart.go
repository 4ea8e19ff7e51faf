package devcluster

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/components"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// Restartable are the components Restart knows: the node's and the control plane's, whose
// restarts the fault tests inflict on a running cluster.
var Restartable = []string{"etcd", "kube-apiserver", "containerd", "kubelet"}

// Restart stops one component of a running cluster, SIGKILLed when kill is set (a crash) or
// else stopped as `down` stops it (SIGTERM, then SIGKILL after the stop timeout), starts it
// again exactly as `up` does and waits until it is ready. It returns how long the component was
// away, from the signal to ready.
func Restart(ctx context.Context, cfg spec.Config, name string, kill bool) (time.Duration, error) {
	cc, err := cfg.WithDefaults()
	if err != nil {
		return 0, err
	}
	if !slices.Contains(Restartable, name) {
		return 0, fmt.Errorf("%s cannot be restarted on its own (restartable: %v)", name, Restartable)
	}
	c := components.New(cc)
	r := c.Proc.Running(name)
	if r == nil {
		return 0, fmt.Errorf("%s is not running: bring the cluster up first", name)
	}
	comp, err := c.Restartable(name)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if kill {
		c.Log.Info("killing", "component", name, "pid", r.PID)
		if err := syscall.Kill(r.PID, syscall.SIGKILL); err != nil {
			return 0, fmt.Errorf("killing %s (pid %d): %w", name, r.PID, err)
		}
		if !proc.WaitGone(r, 10*time.Second) {
			return 0, fmt.Errorf("%s (pid %d) did not exit after SIGKILL", name, r.PID)
		}
	}
	if err := c.Proc.Stop(name); err != nil {
		return 0, err
	}
	if err := c.Proc.Ensure(ctx, comp); err != nil {
		return 0, fmt.Errorf("starting %s again: %w", name, err)
	}
	return time.Since(start), nil
}
