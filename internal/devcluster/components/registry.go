package components

import (
	"fmt"
	"slices"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/hostnet"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/step"
)

// registry is the cluster in Up order; Down runs it backwards, so the order also says what is
// torn down first: the host processes of ours and kwok, then drain (kube-controller-manager,
// every pod while the kubelet and Cilium still run, then the kubelet and containerd), Cilium
// and kube-proxy, the control plane, and last the host's network and paths. Preflight goes
// right before the first part that starts a process (Steps).
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
