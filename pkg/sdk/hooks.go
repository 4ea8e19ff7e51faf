package sdk

import (
	"context"
	"errors"
	"fmt"
)

// Hook is a command run in a sandbox at a point of its life (the harness flow's
// onCreate and onResume): after it became ready, before the SDK hands the
// sandbox back. Make one with OnCreate or OnResume.
type Hook struct {
	when string // hookOnCreate or hookOnResume
	cmd  Command
	opts []RunOption
}

const (
	hookOnCreate = "onCreate"
	hookOnResume = "onResume"
)

// OnCreate runs cmd (with opts: WithEnv, WithCwd, WithTimeout…) once the
// sandbox that Create, GetOrCreate, CreateSandbox or GetOrCreateSandbox
// created is ready, before the call returns. It does not run when
// GetOrCreate or GetOrCreateSandbox finds the sandbox already there: it
// belongs to whoever created it. Several hooks run in order; the first that
// fails (exit status not 0, timeout, or not runnable) ends the call with a
// *HookError, and the sandbox this call created is deleted again, as when
// waiting fails (KeepOnFailure keeps it), so that a later GetOrCreate never
// hands out a sandbox whose set-up did not run. OnCreate cannot be combined
// with NoWait.
func OnCreate(cmd Command, opts ...RunOption) Hook {
	return Hook{when: hookOnCreate, cmd: cmd, opts: opts}
}

// OnResume runs cmd once Resume (or GetOrCreateSandbox resuming a paused
// Sandbox) has the sandbox ready again, before the call returns. A failing
// hook ends the call with a *HookError and leaves the sandbox running: it
// holds the workspace's state, which the SDK never deletes on its own.
func OnResume(cmd Command, opts ...RunOption) Hook {
	return Hook{when: hookOnResume, cmd: cmd, opts: opts}
}

func (h Hook) applyCreate(c *createConfig) { c.hooks = append(c.hooks, h) }
func (h Hook) applyWait(c *waitConfig)     { c.hooks = append(c.hooks, h) }

// HookError is a hook that failed.
type HookError struct {
	// Hook is "onCreate" or "onResume"; Command the hook's command.
	Hook, Command string
	// Sandbox is the claim's (or raw Sandbox's) namespace/name.
	Sandbox string
	// Result is the hook's result when it ran (exit status not 0, or timed
	// out); nil when it could not run.
	Result *Result
	// Err is why it failed: an *ExitError, or the error of running it.
	Err error
	// Deleted is set when the sandbox this call created was deleted again.
	Deleted bool
}

func (e *HookError) Error() string {
	msg := fmt.Sprintf("%s hook %q in sandbox %s failed: %v", e.Hook, e.Command, e.Sandbox, e.Err)
	switch {
	case e.Deleted:
		msg += "; the sandbox was deleted"
	case e.Hook == hookOnResume:
		msg += "; the sandbox is left running"
	default:
		msg += "; the sandbox was kept"
	}
	return msg
}

func (e *HookError) Unwrap() error { return e.Err }

// runHooks runs the hooks of kind when, in order, and stops at the first
// failure.
func (s *Sandbox) runHooks(ctx context.Context, when string, hooks []Hook) error {
	for _, h := range hooks {
		if h.when != when {
			continue
		}
		res, err := s.Run(ctx, h.cmd, h.opts...)
		if err == nil {
			err = res.Err()
		} else {
			res = nil
		}
		if err != nil {
			return &HookError{Hook: when, Command: h.cmd.String(), Sandbox: s.ns + "/" + s.name, Result: res, Err: err}
		}
	}
	return nil
}

// checkHooks refuses option combinations under which hooks could not run.
func (cfg *createConfig) checkHooks() error {
	if !cfg.noWait {
		return nil
	}
	for _, h := range cfg.hooks {
		if h.when == hookOnCreate {
			return errors.New("OnCreate needs the sandbox ready, which NoWait skips")
		}
	}
	return nil
}

// markDeleted records on a HookError that the sandbox was deleted after it.
func markDeleted(err error) {
	var he *HookError
	if errors.As(err, &he) {
		he.Deleted = true
	}
}
