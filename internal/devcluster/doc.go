// Package devcluster runs a single-node Kubernetes cluster on this machine without Docker: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, containerd (with runc and the CNI
// bridge plugin), a real kubelet, kube-proxy, Cilium's agent (NetworkPolicy), CoreDNS, optional
// kwok nodes, and the agent-sandbox controller and router.
//
// The cluster is an ordered list of steps (components.Steps, derived from the components'
// registry), each with Up and Down: Up resolves the binaries (components.EnsureBinaries), hands
// them to the steps and runs them in order, Down runs every Down in reverse. Every process is started detached and
// recorded by pid in the state directory, so Up can be called again (it reuses what runs); every
// step that changes the host records the host as it was before changing it (state dir, host/),
// so Down stops exactly what Up started and restores exactly what it changed, also after a
// crashed Up. The parts live in subpackages: spec (names, ports, Config), proc (processes),
// pki, host (the machine, and a fake of it for tests), step (the runner and the records),
// hostnet (host and network state) and components (the cluster's parts).
package devcluster
