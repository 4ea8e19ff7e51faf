package devcluster

import (
	"context"
	"errors"
	"os"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/components"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/step"
)

// Down runs every step's Down in reverse order of Up: our host processes and kwok stop, pods
// are deleted while the kubelet still runs (so CNI releases their addresses and netns), the
// kubelet and containerd stop and leftover tasks and shims are killed, cilium-agent stops and
// Cilium's datapath is removed (cilium-dbg post-uninstall-cleanup), kube-proxy and the control
// plane stop, then the recorded host state is restored: mounts, netns, iptables chains, the
// bridge, bpffs, sysctls, cgroups and paths. A step that fails keeps its record, so another Down
// can finish the job. Certificates, logs and built binaries stay in the state dir unless purge
// is set, which removes it entirely.
func Down(ctx context.Context, cfg spec.Config, purge bool) error {
	cc, err := cfg.WithDefaults()
	if err != nil {
		return err
	}
	if _, err := os.Stat(cc.Dir); err != nil {
		cc.Progress("nothing to do: %s does not exist", cc.Dir)
		return nil
	}
	env := components.NewEnv(cc)
	err = step.Down(ctx, components.Steps(env), func(name string, err error) {
		cc.Log.Warn("teardown step failed", "step", name, "err", err)
	})
	if err != nil {
		return err
	}
	if err := os.Remove(env.Store.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if purge {
		if err := os.RemoveAll(cc.Dir); err != nil {
			return err
		}
	}
	cc.Progress("cluster stopped and host restored")
	return nil
}
