// Package components are the parts of the local cluster, each with the step that brings it up
// and down: certificates, the host's network and paths (hostnet's steps), the control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), the PV provisioner, the node
// (containerd, the kubelet, kube-proxy, Cilium), CoreDNS, the drain that tears pods down before
// the node stops, kwok, and the agent-sandbox install. One registry lists them in order; the
// steps, status, restart and "all running" are derived from it.
package components

import (
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/hostnet"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/step"
)

// Env is what a component's step works with: the configuration, the process supervisor, the
// host, the records, and the binaries resolved for this run.
type Env struct {
	Cfg   *spec.Config
	Proc  *proc.Supervisor
	Host  host.Host
	Store step.Store
	// Bins are the binaries EnsureBinaries built (up) or LocateBinaries found (restart); empty
	// for down and status, which start nothing.
	Bins Binaries
}

// NewEnv is the Env of a defaulted Config, on this machine.
func NewEnv(c *spec.Config) Env {
	return Env{
		Cfg:   c,
		Proc:  &proc.Supervisor{Dir: c.Dir, Log: c.Log, Out: c.Out, StopTimeout: c.StopTimeout},
		Host:  host.Real{},
		Store: step.Store{Dir: c.Path("host")},
	}
}

// hostnet is the part of the Env hostnet's steps work with.
func (e Env) hostnet() hostnet.Env { return hostnet.Env{Host: e.Host, Store: e.Store} }

// Binaries are the folders of the binaries the cluster runs that are not ours (ours are in
// the state dir's bin/, spec.Config.OurBin), each from the build cache of a hack/build-*.sh.
type Binaries struct {
	// K8s holds the Kubernetes binaries, kubectl, helm, CoreDNS and kwok.
	K8s string
	// Cilium holds Cilium's binaries, the bpf/ sources the agent compiles, and its CRDs.
	Cilium string
	// GVisor holds runsc and its containerd shim.
	GVisor string
}
