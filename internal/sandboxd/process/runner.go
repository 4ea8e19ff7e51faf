package process

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
)

// Config configures a Runner.
type Config struct {
	// Shell runs "command" strings as Shell -c.
	Shell string
	// AlwaysShell runs every command string through Shell, even one the shell would only exec
	// as its words say (direct.go: by default those are exec'd directly).
	AlwaysShell bool
	// MaxOutput caps each output stream of a collected command.
	MaxOutput int64
	// KillGrace is the time between SIGTERM and SIGKILL when a process
	// group is killed.
	KillGrace time.Duration
	// Observe, when set, records how a command ended, by mode (metrics).
	Observe func(mode string, res Result)
}

// Runner starts commands in the sandbox root and keeps track of the
// foreground ones (those run by Run), so that shutdown can kill them and
// wait for them.
type Runner struct {
	cfg  Config
	root rootfs.Resolver

	mu      sync.Mutex
	running map[*Command]struct{} // foreground commands, killed on shutdown
	stopped bool                  // shutting down: no new foreground commands
	wg      sync.WaitGroup        // foreground commands in flight
}

// NewRunner returns a Runner whose working directories resolve inside root.
func NewRunner(root rootfs.Resolver, cfg Config) *Runner {
	childrenGetDefaultSignals()
	return &Runner{cfg: cfg, root: root, running: map[*Command]struct{}{}}
}

// KillGrace is the time between SIGTERM and SIGKILL.
func (r *Runner) KillGrace() time.Duration { return r.cfg.KillGrace }

// Observe records how a command ended (see Config.Observe).
func (r *Runner) Observe(mode string, res Result) {
	if r.cfg.Observe != nil {
		r.cfg.Observe(mode, res)
	}
}

// Result is how a command ended.
type Result struct {
	ExitCode int
	Signal   int // the signal that killed it, 0 if it exited
	TimedOut bool
	Duration time.Duration
	StartErr *StartError // the command could not start (ExitCode 127 or 126)
}

// Run starts sp and waits for it, killing the process group when ctx ends
// or the timeout expires. emit receives output as it arrives; onStart (may
// be nil) sees the command once it runs. A command that cannot start is
// reported through emit as stderr plus exit code 127/126.
func (r *Runner) Run(ctx context.Context, sp *Spec, keepStdin bool, emit func(int, []byte), onStart func(*Command)) Result {
	begin := time.Now()
	c, err := r.Start(sp, keepStdin)
	if err != nil {
		var se *StartError
		if !errors.As(err, &se) {
			se = &StartError{126, err.Error()}
		}
		emit(Stderr, []byte(se.Msg))
		return Result{ExitCode: se.Code, Duration: time.Since(begin), StartErr: se}
	}
	if !r.track(c) {
		c.Kill()
	}
	defer r.untrack(c)
	if onStart != nil {
		onStart(c)
	}

	var timeout <-chan time.Time
	if sp.Timeout > 0 {
		t := time.NewTimer(sp.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	pumped := make(chan struct{})
	go func() { c.PumpOutput(emit); close(pumped) }()

	timedOut, killing := false, false
	killed := make(chan struct{})
	select {
	case <-c.exited:
	case <-timeout:
		timedOut, killing = true, true
	case <-ctx.Done():
		killing = true
	}
	if killing {
		go func() { c.Terminate(r.cfg.KillGrace); close(killed) }()
	}
	<-c.exited
	<-pumped
	if killing {
		<-killed // the group is gone too, not just the leader
	}
	res := Result{ExitCode: exitCode(c.state), Signal: termSignal(c.state), TimedOut: timedOut, Duration: time.Since(begin)}
	if timedOut {
		res.ExitCode = 124 // like coreutils timeout(1)
	}
	return res
}

// track registers a running foreground command so shutdown can kill it and
// wait for it. It returns false once the Runner is stopped; the caller then
// kills the command itself.
func (r *Runner) track(c *Command) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	r.running[c] = struct{}{}
	r.wg.Add(1) // under mu: never concurrent with Wait at zero after Stop
	return true
}

func (r *Runner) untrack(c *Command) {
	r.mu.Lock()
	_, ok := r.running[c]
	delete(r.running, c)
	r.mu.Unlock()
	if ok {
		r.wg.Done()
	}
}

// Stop refuses new foreground commands: from now on Run kills a command as
// soon as it starts. Call it before Wait.
func (r *Runner) Stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}

// KillAll terminates every running foreground command (SIGTERM, then
// SIGKILL after KillGrace) without waiting.
func (r *Runner) KillAll() {
	r.mu.Lock()
	cmds := make([]*Command, 0, len(r.running))
	for c := range r.running {
		cmds = append(cmds, c)
	}
	r.mu.Unlock()
	for _, c := range cmds {
		go c.Terminate(r.cfg.KillGrace)
	}
}

// Wait waits until no foreground command runs.
func (r *Runner) Wait() { r.wg.Wait() }
