// Package components are the steps of the local cluster that run its parts: binaries and
// certificates, the control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler), the node (containerd, the kubelet, kube-proxy, Cilium), CoreDNS, kwok, the
// agent-sandbox install, and the drain that tears pods down before the node stops.
package components

import (
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/step"
)

// Cluster is what the steps share: the configuration, the process supervisor, the host, the
// records, and what the binaries step found.
type Cluster struct {
	*spec.Config
	Proc  *proc.Supervisor
	Host  host.Host
	Store step.Store
	// Bin holds the Kubernetes binaries, CiliumDir the Cilium build, GVisorDir runsc and its
	// shim (set by Binaries).
	Bin, CiliumDir, GVisorDir string
}

// New is the cluster of a defaulted Config, on this machine.
func New(c *spec.Config) *Cluster {
	return &Cluster{
		Config: c,
		Proc:   &proc.Supervisor{Dir: c.Dir, Log: c.Log, Out: c.Out, StopTimeout: c.StopTimeout},
		Host:   host.Real{},
		Store:  step.Store{Dir: c.Path("host")},
	}
}
