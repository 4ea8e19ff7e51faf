package components

import (
	"context"
	"fmt"
	"slices"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/hostnet"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/step"
)

// Component is one part of the cluster, a row of the registry from which the steps, status,
// restart and "all running" are derived.
type Component struct {
	// Name names the part's step and, for a part of one process, the process.
	Name string
	// Step makes the part's step of a run; nil for a part of one process, whose step starts
	// it (processStep).
	Step func(Env) step.Step
	// Processes are the host processes the part runs, in start order.
	Processes []Process
	// Status reports a part that runs in pods rather than as a process of its own (CoreDNS).
	Status func(context.Context, Env) ComponentStatus
}

// When says when Up runs a process on the host.
type When int

const (
	// Always: every Up.
	Always When = iota
	// WithHostProcesses: with --host-processes; otherwise the chart's Deployment runs it.
	WithHostProcesses
	// WithKwokNodes: with --kwok-nodes.
	WithKwokNodes
)

// Process is a host process of a component.
type Process struct {
	Name string
	When When
	// Build makes the process as Up starts it (writing its config), from the run's binaries.
	Build func(Env) (proc.Component, error)
	// Check is its health check in status.
	Check func(Env) func(context.Context) error
	// Before runs ahead of a start (not when the process still runs); After, once it is ready;
	// Cleanup, once Down stopped it.
	Before, After func(context.Context, Env) error
	Cleanup       func(Env) error
	// Restartable: Restart stops and starts it on its own. These are the node's and the
	// control plane's, whose restarts the fault tests inflict on a running cluster.
	Restartable bool
}

// registry is the cluster in Up order; Down runs it backwards, so the order also says what is
// torn down first: the host processes of ours and kwok, then drain (kube-controller-manager,
// every pod while the kubelet and Cilium still run, then the kubelet and containerd), Cilium
// and kube-proxy, the control plane, and last the host's network and paths. Preflight goes
// right before the first part that starts a process (preflightFirst).
var registry = []Component{
	{Name: "pki", Step: func(e Env) step.Step { return pkiStep{e} }},
	{Name: "state-dir", Step: func(e Env) step.Step { return hostnet.StateDir{Env: e.hostnet(), Dir: e.Cfg.Dir} }},
	{Name: "host-paths", Step: func(e Env) step.Step { return hostnet.Paths{Env: e.hostnet()} }},
	{Name: "volume-root", Step: func(e Env) step.Step { return hostnet.VolumeRoot{Env: e.hostnet()} }},
	{Name: "netfilter", Step: func(e Env) step.Step { return hostnet.Netfilter{Env: e.hostnet()} }},
	{Name: "sysctls", Step: func(e Env) step.Step { return hostnet.Sysctls{Env: e.hostnet()} }},
	{Name: "netns", Step: func(e Env) step.Step { return hostnet.Netns{Env: e.hostnet()} }},
	{Name: "bridge", Step: func(e Env) step.Step { return hostnet.Bridge{Env: e.hostnet()} }},
	{Name: "bpffs", Step: func(e Env) step.Step { return hostnet.BPFFS{Env: e.hostnet()} }},
	{Name: "cni-cache", Step: func(e Env) step.Step { return hostnet.CNICache{Env: e.hostnet(), Network: spec.CNINetwork} }},
	{Name: "cni-config", Step: func(e Env) step.Step { return cniConfigStep{e} }},
	{Name: "etcd", Processes: []Process{{Name: "etcd", Build: infallible(etcd), Check: ownReady(etcd), Restartable: true}}},
	{Name: "kube-apiserver", Processes: []Process{{Name: "kube-apiserver", Build: infallible(apiserver), Check: ownReady(apiserver), Restartable: true}}},
	{Name: "kube-controller-manager", Processes: []Process{{Name: "kube-controller-manager", Build: infallible(controllerManager), Check: ownReady(controllerManager)}}},
	{Name: "kube-scheduler", Processes: []Process{{Name: "kube-scheduler", Build: infallible(scheduler), Check: ownReady(scheduler)}}},
	{Name: hostPathProvisionerName, Processes: []Process{{Name: hostPathProvisionerName, Build: restartedIfRebuilt(hostPathProvisioner), Check: ownReady(hostPathProvisioner)}}},
	{Name: "containerd", Processes: []Process{{Name: "containerd", Build: containerd, Check: containerdReady,
		After: importPodImages, Cleanup: cleanupContainerd, Restartable: true}}},
	{Name: "kubelet", Processes: []Process{{Name: "kubelet", Build: kubelet, Check: kubeletReady, Restartable: true}}},
	{Name: "kube-proxy", Processes: []Process{{Name: "kube-proxy", Build: kubeProxy, Check: kubeProxyReady}}},
	{Name: "cilium-agent", Processes: []Process{{Name: "cilium-agent", Build: ciliumAgentRecorded, Check: ciliumReady,
		Before: prepareCiliumOnce, Cleanup: cleanupCilium}}},
	{Name: "coredns", Step: func(e Env) step.Step { return dnsStep{e} }, Status: dnsStatus},
	{Name: "drain", Step: func(e Env) step.Step { return drainStep{e} }},
	{Name: "kwok", Step: func(e Env) step.Step { return kwokStep{e} },
		Processes: []Process{{Name: "kwok", When: WithKwokNodes, Check: kwokNodesReady}}},
	{Name: "agent-sandbox", Step: func(e Env) step.Step { return &installStep{env: e} }, Processes: ourProcesses},
	{Name: "ready", Step: func(e Env) step.Step { return readyStep{e} }},
}

// infallible is a process builder that writes nothing, so cannot fail.
func infallible(build func(Env) proc.Component) func(Env) (proc.Component, error) {
	return func(e Env) (proc.Component, error) { return build(e), nil }
}

// ownReady is the readiness check Up waits on, as the status check: built without binaries,
// of which a check needs none.
func ownReady(build func(Env) proc.Component) func(Env) func(context.Context) error {
	return func(e Env) func(context.Context) error { return build(e).Ready }
}

// Steps is the cluster in order, the binaries e.Bins handed to every step that starts a
// process; Down runs it backwards (e.Bins may be empty then: no Down starts anything).
func Steps(e Env) []step.Step {
	var steps []step.Step
	var procs []portsUser
	for _, c := range registry {
		s := c.step(e)
		if p, ok := s.(portsUser); ok {
			if len(procs) == 0 {
				steps = append(steps, &preflight{env: e})
			}
			procs = append(procs, p)
		}
		steps = append(steps, s)
	}
	for _, s := range steps {
		if p, ok := s.(*preflight); ok {
			p.steps = procs
		}
	}
	return steps
}

// step is the component's step in a run.
func (c Component) step(e Env) step.Step {
	if c.Step != nil {
		return c.Step(e)
	}
	return &processStep{env: e, process: c.Processes[0]}
}

// processes are the registry's processes in start order.
func processes() []Process {
	var out []Process
	for _, c := range registry {
		out = append(out, c.Processes...)
	}
	return out
}

// ProcessNames lists every process the cluster may run, in start order.
func ProcessNames() []string {
	var names []string
	for _, p := range processes() {
		names = append(names, p.Name)
	}
	return names
}

// AllRunning reports whether every process Up runs (kwok aside) is running.
func AllRunning(e Env) bool {
	for _, p := range processes() {
		if p.When == WithKwokNodes || (p.When == WithHostProcesses && !e.Cfg.HostProcesses) {
			continue
		}
		if e.Proc.Running(p.Name) == nil {
			return false
		}
	}
	return true
}

// Restartable names the processes Restart stops and starts on their own.
func Restartable() []string {
	var names []string
	for _, p := range processes() {
		if p.Restartable {
			names = append(names, p.Name)
		}
	}
	return names
}

// restartable is the named process, when Restart may restart it.
func restartable(name string) (Process, error) {
	i := slices.IndexFunc(processes(), func(p Process) bool { return p.Name == name && p.Restartable })
	if i < 0 {
		return Process{}, fmt.Errorf("%s cannot be restarted on its own (restartable: %v)", name, Restartable())
	}
	return processes()[i], nil
}
