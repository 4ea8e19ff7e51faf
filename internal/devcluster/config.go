// Package devcluster runs a single-node Kubernetes cluster on this machine without Docker: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, containerd (with runc and the CNI
// bridge plugin), a real kubelet, kube-proxy, Cilium's agent (NetworkPolicy), CoreDNS, optional
// kwok nodes, and the agent-sandbox controller and router.
//
// The cluster is an ordered list of steps (components.Cluster.Steps), each with Up and Down:
// Up runs them in order, Down runs every Down in reverse. Every process is started detached and
// recorded by pid in the state directory, so Up can be called again (it reuses what runs); every
// step that changes the host records the host as it was before changing it (state dir, host/),
// so Down stops exactly what Up started and restores exactly what it changed, also after a
// crashed Up. The parts live in subpackages: spec (names, ports, Config), proc (processes),
// pki, host (the machine, and a fake of it for tests), step (the runner and the records),
// hostnet (host and network state) and components (the cluster's parts).
package devcluster

import (
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// Fixed names and addresses of the cluster (see spec).
const (
	NodeName        = spec.NodeName
	BridgeName      = spec.BridgeName
	SystemNS        = spec.SystemNS
	StorageClass    = spec.StorageClass
	RuntimeImage    = spec.RuntimeImage
	PauseImage      = spec.PauseImage
	ControllerImage = spec.ControllerImage
	RouterImage     = spec.RouterImage
)

// Config says where the cluster lives and what it runs.
type Config = spec.Config

// Ports are the cluster's ports.
type Ports = spec.Ports

// DefaultPorts are the ports the cluster uses unless a Config says otherwise.
var DefaultPorts = spec.DefaultPorts

// DefaultDir is ${XDG_STATE_HOME:-~/.local/state}/agent-sandbox/dev.
func DefaultDir() string { return spec.DefaultDir() }
