package components

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
)

// Restart stops one process of a running cluster, SIGKILLed when kill is set (a crash) or
// else stopped as Down stops it (SIGTERM, then SIGKILL after the stop timeout), starts it
// again exactly as Up does, with the binaries LocateBinaries finds, and waits until it is
// ready. It returns how long the process was away, from the signal to ready.
func Restart(ctx context.Context, e Env, name string, kill bool) (time.Duration, error) {
	p, err := restartable(name)
	if err != nil {
		return 0, err
	}
	if e.Proc.Running(name) == nil {
		return 0, fmt.Errorf("%s is not running: bring the cluster up first", name)
	}
	if e.Bins, err = LocateBinaries(e); err != nil {
		return 0, err
	}
	return restart(ctx, e, p, kill)
}

// restart is Restart of a process the registry names restartable, with e.Bins resolved.
func restart(ctx context.Context, e Env, p Process, kill bool) (time.Duration, error) {
	r := e.Proc.Running(p.Name)
	if r == nil {
		return 0, fmt.Errorf("%s is not running: bring the cluster up first", p.Name)
	}
	comp, err := p.Build(e)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if kill {
		e.Cfg.Log.Info("killing", "component", p.Name, "pid", r.PID)
		if err := syscall.Kill(r.PID, syscall.SIGKILL); err != nil {
			return 0, fmt.Errorf("killing %s (pid %d): %w", p.Name, r.PID, err)
		}
		if !proc.WaitGone(r, 10*time.Second) {
			return 0, fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, r.PID)
		}
	}
	if err := e.Proc.Stop(p.Name); err != nil {
		return 0, err
	}
	if err := e.Proc.Ensure(ctx, comp); err != nil {
		return 0, fmt.Errorf("starting %s again: %w", p.Name, err)
	}
	return time.Since(start), nil
}
