package components

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
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

// ComponentStatus is one line of `dev status`.
type ComponentStatus struct {
	Name    string
	PID     int // 0 when not running
	Healthy bool
	Detail  string
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

// infallible is a process builder that writes nothing, so cannot fail.
func infallible(build func(Env) proc.Component) func(Env) (proc.Component, error) {
	return func(e Env) (proc.Component, error) { return build(e), nil }
}

// ownReady is the readiness check Up waits on, as the status check: built without binaries,
// of which a check needs none.
func ownReady(build func(Env) proc.Component) func(Env) func(context.Context) error {
	return func(e Env) func(context.Context) error { return build(e).Ready }
}

// processStep is the step of a component of one process: Up starts it unless our recorded
// process still runs and waits until it is ready; Down stops it. The pid file is its record.
type processStep struct {
	env     Env
	process Process
	built   *proc.Component
}

func (p *processStep) Name() string { return p.process.Name }

// components is the process as this run starts it, built (writing its config) once per run.
func (p *processStep) components() ([]proc.Component, error) {
	if p.built == nil {
		comp, err := p.process.Build(p.env)
		if err != nil {
			return nil, err
		}
		p.built = &comp
	}
	return []proc.Component{*p.built}, nil
}

func (p *processStep) Up(ctx context.Context) error {
	comps, err := p.components()
	if err != nil {
		return err
	}
	if p.process.Before != nil && p.env.Proc.Running(p.process.Name) == nil {
		if err := p.process.Before(ctx, p.env); err != nil {
			return err
		}
	}
	if err := p.env.Proc.Ensure(ctx, comps[0]); err != nil {
		return err
	}
	if p.process.After != nil {
		return p.process.After(ctx, p.env)
	}
	return nil
}

func (p *processStep) Down(context.Context) error {
	err := p.env.Proc.Stop(p.process.Name)
	if p.process.Cleanup != nil {
		err = errors.Join(err, p.process.Cleanup(p.env))
	}
	return err
}

// portsUser is a step that starts processes, whose ports preflight checks.
type portsUser interface {
	// components are the processes the step starts in this run.
	components() ([]proc.Component, error)
}

// preflight refuses to start anything when a port of a process that is not running is taken,
// so that a conflict is reported before half a cluster is up.
type preflight struct {
	env   Env
	steps []portsUser
}

func (*preflight) Name() string { return "preflight" }

func (s *preflight) Up(context.Context) error {
	var errs []error
	for _, st := range s.steps {
		comps, err := st.components()
		if err != nil {
			return err
		}
		for _, comp := range comps {
			if s.env.Proc.Running(comp.Name) != nil {
				continue
			}
			for _, a := range comp.Addrs {
				if err := proc.PortFree(a); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", comp.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func (*preflight) Down(context.Context) error { return nil }

// restartedIfRebuilt builds one of our processes, first stopping a running one whose binary
// was rebuilt since it started, so that `up` after a code change runs the new code.
func restartedIfRebuilt(build func(Env) proc.Component) func(Env) (proc.Component, error) {
	return func(e Env) (proc.Component, error) {
		comp := build(e)
		if err := restartIfReplaced(e, comp.Name); err != nil {
			return proc.Component{}, err
		}
		return comp, nil
	}
}

func restartIfReplaced(e Env, name string) error {
	r := e.Proc.Running(name)
	if r == nil {
		return nil
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", r.PID))
	if err != nil || !strings.HasSuffix(exe, " (deleted)") {
		return nil
	}
	e.Cfg.Progress("restarting %s: its binary was rebuilt", name)
	return e.Proc.Stop(name)
}
