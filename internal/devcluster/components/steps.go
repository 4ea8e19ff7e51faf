package components

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/hostnet"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/pki"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/step"
)

// Steps is the cluster in order. Down runs it backwards, so the order also says what is torn
// down first: the host processes of ours and kwok, then Drain (kube-controller-manager, every
// pod while the kubelet and Cilium still run, then the kubelet and containerd), Cilium and
// kube-proxy, the control plane, and last the host's network and paths.
func (c *Cluster) Steps() []step.Step {
	env := hostnet.Env{Host: c.Host, Store: c.Store}
	node := []*Process{
		{c: c, name: "containerd", build: c.containerd, after: c.importPodImages,
			// Shims outlive containerd by design; runsc's sandboxes may outlive their shims.
			down: func() error { c.killShims(); return c.cleanupRunsc() }},
		{c: c, name: "kubelet", build: func() (proc.Component, error) { return c.kubelet(c.Bin) }},
		{c: c, name: "kube-proxy", build: func() (proc.Component, error) { return c.kubeProxy(c.Bin) }},
		{c: c, name: "cilium-agent", build: c.ciliumAgentRecorded, before: c.prepareCiliumOnce, down: c.cleanupCilium},
	}
	control := []*Process{
		{c: c, name: "etcd", build: func() (proc.Component, error) { return c.etcd(c.Bin), nil }},
		{c: c, name: "kube-apiserver", build: func() (proc.Component, error) { return c.apiserver(c.Bin), nil }},
		{c: c, name: "kube-controller-manager", build: func() (proc.Component, error) { return c.controllerManager(c.Bin), nil }},
		{c: c, name: "kube-scheduler", build: func() (proc.Component, error) { return c.scheduler(c.Bin), nil }},
		{c: c, name: hostPathProvisionerName, build: c.hostPathProvisionerStep},
	}
	install := &Install{c: c}
	preflight := &Preflight{c: c, install: install}
	preflight.procs = append(append(preflight.procs, control...), node...)
	steps := []step.Step{
		Binaries{c}, PKI{c}, hostnet.StateDir{Env: env, Dir: c.Dir},
		hostnet.Paths{Env: env}, hostnet.VolumeRoot{Env: env}, hostnet.Netfilter{Env: env}, hostnet.Sysctls{Env: env}, hostnet.Netns{Env: env},
		hostnet.Bridge{Env: env}, hostnet.BPFFS{Env: env}, hostnet.CNICache{Env: env, Network: spec.CNINetwork},
		CNIConfig{c}, preflight,
	}
	for _, p := range append(control, node...) {
		steps = append(steps, p)
	}
	return append(steps, DNS{c}, Drain{c}, Kwok{c}, install, Ready{c})
}

// Binaries installs the node packages and builds what is missing: the Kubernetes binaries,
// Cilium, gVisor, and (incrementally) ours. Nothing of it is undone.
type Binaries struct{ c *Cluster }

func (Binaries) Name() string { return "binaries" }

func (s Binaries) Up(ctx context.Context) error {
	c := s.c
	if err := c.ensureNodeDeps(ctx); err != nil {
		return fmt.Errorf("installing node packages: %w", err)
	}
	var err error
	if c.Bin, err = c.ensureK8sBinaries(ctx); err != nil {
		return err
	}
	if c.CiliumDir, err = c.ensureCilium(ctx); err != nil {
		return err
	}
	if c.GVisorDir, err = c.ensureGVisor(ctx); err != nil {
		return err
	}
	return c.buildOurs(ctx)
}

func (Binaries) Down(context.Context) error { return nil }

// PKI makes the certificates and kubeconfigs once; they stay (`down --purge` removes them).
type PKI struct{ c *Cluster }

func (PKI) Name() string { return "pki" }

func (s PKI) Up(context.Context) error {
	if err := pki.Ensure(s.c.Config); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	return nil
}

func (PKI) Down(context.Context) error { return nil }

// CNIConfig writes the pod network's CNI config and plugin links into the state dir.
type CNIConfig struct{ c *Cluster }

func (CNIConfig) Name() string { return "cni-config" }

func (s CNIConfig) Up(context.Context) error { return s.c.writeCNIConfig(s.c.CiliumDir) }

func (CNIConfig) Down(context.Context) error { return nil }

// Process is a step that runs one process of the cluster: Up starts it unless our recorded
// process still runs and waits until it is ready; Down stops it. The pid file is its record.
type Process struct {
	c    *Cluster
	name string
	// build makes the component (writing its config); called once per run.
	build func() (proc.Component, error)
	// before runs ahead of a start (not when the process still runs); after, once it is ready.
	before, after func(context.Context) error
	// down cleans up after the process stopped.
	down  func() error
	built *proc.Component
}

func (p *Process) Name() string { return p.name }

// Component is the process as this run starts it.
func (p *Process) Component() (proc.Component, error) {
	if p.built == nil {
		comp, err := p.build()
		if err != nil {
			return proc.Component{}, err
		}
		p.built = &comp
	}
	return *p.built, nil
}

func (p *Process) Up(ctx context.Context) error {
	comp, err := p.Component()
	if err != nil {
		return err
	}
	if p.before != nil && p.c.Proc.Running(p.name) == nil {
		if err := p.before(ctx); err != nil {
			return err
		}
	}
	if err := p.c.Proc.Ensure(ctx, comp); err != nil {
		return err
	}
	if p.after != nil {
		return p.after(ctx)
	}
	return nil
}

func (p *Process) Down(context.Context) error {
	err := p.c.Proc.Stop(p.name)
	if p.down != nil {
		err = errors.Join(err, p.down())
	}
	return err
}

// importPodImages imports the runtime and pause images once containerd runs, before the
// kubelet: it must find the pause image when it starts pods.
func (c *Cluster) importPodImages(ctx context.Context) error {
	c.Progress("importing images %s and %s into containerd", spec.RuntimeImage, spec.PauseImage)
	return c.importImages(ctx, "runtime", "pause")
}

func (c *Cluster) prepareCiliumOnce(ctx context.Context) error {
	if err := c.prepareCilium(ctx, c.CiliumDir); err != nil {
		return fmt.Errorf("preparing Cilium: %w", err)
	}
	return nil
}

// Preflight refuses to start anything when a port of a component that is not running is taken,
// so that a conflict is reported before half a cluster is up.
type Preflight struct {
	c       *Cluster
	procs   []*Process
	install *Install
}

func (*Preflight) Name() string { return "preflight" }

func (s *Preflight) Up(context.Context) error {
	var comps []proc.Component
	for _, p := range s.procs {
		comp, err := p.Component()
		if err != nil {
			return err
		}
		comps = append(comps, comp)
	}
	ours, err := s.install.hostProcessComponents()
	if err != nil {
		return err
	}
	var errs []error
	for _, comp := range append(comps, ours...) {
		if s.c.Proc.Running(comp.Name) != nil {
			continue
		}
		for _, a := range comp.Addrs {
			if err := proc.PortFree(a); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", comp.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (*Preflight) Down(context.Context) error { return nil }

// DNS applies CoreDNS once the node runs; Ready waits for it. Its pods go with the others.
type DNS struct{ c *Cluster }

func (DNS) Name() string { return "coredns" }

func (s DNS) Up(ctx context.Context) error { return s.c.applyDNS(ctx, s.c.Bin) }

func (DNS) Down(context.Context) error { return nil }

// Kwok runs kwok and registers the simulated nodes (with --kwok-nodes); Down stops kwok.
type Kwok struct{ c *Cluster }

func (Kwok) Name() string { return "kwok" }

func (s Kwok) Up(ctx context.Context) error {
	c := s.c
	if c.KwokNodes <= 0 {
		return nil
	}
	comp, err := c.kwok(ctx, c.Bin)
	if err != nil {
		return err
	}
	if err := c.Proc.Ensure(ctx, comp); err != nil {
		return err
	}
	c.Progress("registering %d simulated (kwok) nodes", c.KwokNodes)
	return c.ensureKwokNodes(ctx)
}

func (s Kwok) Down(context.Context) error { return s.c.Proc.Stop("kwok") }

// Install applies the CRDs and the cluster's own objects, then runs the controller and router
// as the chart's Deployments or as host processes; Down stops the host processes (the
// Deployments' pods go with Drain).
type Install struct {
	c     *Cluster
	comps []proc.Component
	built bool
}

func (*Install) Name() string { return "agent-sandbox" }

// hostProcessComponents are the controller and router as host processes (restarting one whose
// binary was rebuilt), or none when the chart runs them.
func (s *Install) hostProcessComponents() ([]proc.Component, error) {
	if s.built || !s.c.HostProcesses {
		return s.comps, nil
	}
	for _, name := range []string{"agent-sandbox-controller", "sandbox-router"} {
		if err := s.c.restartIfReplaced(name); err != nil {
			return nil, err
		}
	}
	s.comps, s.built = []proc.Component{s.c.controller(), s.c.router()}, true
	return s.comps, nil
}

func (s *Install) Up(ctx context.Context) error {
	ours, err := s.hostProcessComponents()
	if err != nil {
		return err
	}
	return s.c.installAgentSandbox(ctx, filepath.Join(s.c.Bin, "helm"), ours)
}

func (s *Install) Down(context.Context) error {
	// Our controllers first, so nothing recreates the pods Drain deletes next.
	return errors.Join(s.c.Proc.Stop("sandbox-router"), s.c.Proc.Stop("agent-sandbox-controller"))
}

// Ready waits for CoreDNS and writes the developer's router token.
type Ready struct{ c *Cluster }

func (Ready) Name() string { return "ready" }

func (s Ready) Up(ctx context.Context) error {
	if err := s.c.waitDNS(ctx); err != nil {
		return err
	}
	_, err := s.c.writeRouterToken(ctx)
	return err
}

func (Ready) Down(context.Context) error { return nil }

// restartIfReplaced stops a running component whose binary was rebuilt since it started, so
// that `up` after a code change runs the new code.
func (c *Cluster) restartIfReplaced(name string) error {
	r := c.Proc.Running(name)
	if r == nil {
		return nil
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", r.PID))
	if err != nil || !strings.HasSuffix(exe, " (deleted)") {
		return nil
	}
	c.Progress("restarting %s: its binary was rebuilt", name)
	return c.Proc.Stop(name)
}
