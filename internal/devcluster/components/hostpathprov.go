package components

import (
	"context"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/hostpathprov"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

const hostPathProvisionerName = "hostpath-provisioner"

// hostPathProvisioner is `devcluster hostpath-provisioner`: the default StorageClass's
// provisioner, whose volumes are 0777 directories so that non-root sandboxes can write them.
// It runs as its own identity, which the built-in system:persistent-volume-provisioner role
// authorizes (manifests/cluster.yaml).
func hostPathProvisioner(e Env) proc.Component {
	health := spec.Loopback(e.Cfg.Ports.ProvisionerHealth)
	return proc.Component{
		Name: hostPathProvisionerName, Exe: e.Cfg.OurBin("devcluster"), Timeout: time.Minute,
		Addrs: []string{health},
		Args: []string{hostPathProvisionerName,
			"--kubeconfig=" + e.Cfg.KubeconfigFor(hostPathProvisionerName),
			"--root=" + hostpathprov.DefaultRoot,
			"--health-addr=" + health,
		},
		Ready: func(ctx context.Context) error { return proc.HTTPOK(ctx, nil, "http://"+health+"/healthz", "ok") },
	}
}

// replaceForeignStorageClass deletes the default StorageClass when another provisioner serves
// it (kube-controller-manager's kubernetes.io/host-path, in state dirs of earlier versions);
// install then applies ours.
func replaceForeignStorageClass(ctx context.Context, e Env) error {
	cs, err := kube.Clientset(e.Cfg.KubeconfigPath())
	if err != nil {
		return err
	}
	old, err := hostpathprov.DeleteForeignClass(ctx, cs, spec.StorageClass)
	if old != "" {
		e.Cfg.Progress("replaced StorageClass %s of provisioner %s with one of %s", spec.StorageClass, old, hostpathprov.Name)
	}
	return err
}
