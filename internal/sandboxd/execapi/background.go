package execapi

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// maxExitedProcesses bounds how many finished processes are remembered; the
// oldest exited ones are forgotten first.
const maxExitedProcesses = 256

// backgroundProcess is a background command and its retained output.
type backgroundProcess struct {
	id        string
	spec      *process.Spec
	startedAt time.Time
	pid       int
	cmd       *process.Command // nil when the command could not start
	done      chan struct{}

	mu       sync.Mutex
	out      [2]*ringBuffer
	changed  chan struct{} // closed and replaced on every update
	running  bool
	exitCode int
	timedOut bool
	exitedAt time.Time
}

func (p *backgroundProcess) emit(i int, b []byte) {
	p.mu.Lock()
	p.out[i].Write(b)
	p.notifyLocked()
	p.mu.Unlock()
}

func (p *backgroundProcess) isRunning() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *backgroundProcess) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *backgroundProcess) info() wire.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := wire.Process{
		ID: p.id, PID: p.pid, Cwd: p.spec.Cwd, StartedAt: p.startedAt,
		Running: p.running, TimedOut: p.timedOut,
	}
	if p.spec.Req.Command != "" {
		w.Command = p.spec.Req.Command
	} else {
		w.Argv = p.spec.Argv
	}
	if !p.running {
		code, at := p.exitCode, p.exitedAt
		w.ExitCode, w.ExitedAt = &code, &at
	}
	return w
}

// processTable owns the background processes.
type processTable struct {
	runner   *process.Runner
	logBytes int // ring buffer size per stream
	mu       sync.Mutex
	m        map[string]*backgroundProcess
	closed   bool
	wg       sync.WaitGroup // one per process until it is reaped
}

func newProcessTable(runner *process.Runner, logBytes int) *processTable {
	return &processTable{runner: runner, logBytes: logBytes, m: map[string]*backgroundProcess{}}
}

func (t *processTable) get(id string) *backgroundProcess {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

func (t *processTable) runningCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.m {
		if p.isRunning() {
			n++
		}
	}
	return n
}

// errShuttingDown refuses new background processes during shutdown.
var errShuttingDown = &respond.StatusError{Status: http.StatusServiceUnavailable, Msg: "server is shutting down"}

// startProcess launches sp in the background. A command that cannot start
// still gets a record, already exited with 127/126 and the reason on stderr,
// the same outcome as a foreground exec.
func (t *processTable) startProcess(sp *process.Spec) (*backgroundProcess, error) {
	p := &backgroundProcess{
		id:        "p-" + randomHex(8),
		spec:      sp,
		startedAt: time.Now().UTC(),
		done:      make(chan struct{}),
		changed:   make(chan struct{}),
		running:   true,
	}
	size := t.logBytes
	p.out = [2]*ringBuffer{newRingBuffer(size), newRingBuffer(size)}
	c, startErr := t.runner.Start(sp, false)
	if startErr == nil {
		p.cmd, p.pid = c, c.PID() // immutable once p is published below
	}

	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		if c != nil {
			c.Kill()
			<-c.Exited()
			c.PumpOutput(func(int, []byte) {})
		}
		return nil, errShuttingDown
	}
	t.evictLocked()
	t.m[p.id] = p
	t.wg.Add(1)
	t.mu.Unlock()

	if startErr != nil {
		p.emit(process.Stderr, []byte(startErr.Error()))
		code := 126
		if se, ok := startErr.(*process.StartError); ok {
			code = se.Code
		}
		p.finish(process.Result{ExitCode: code})
		t.wg.Done()
		return p, nil
	}
	go func() {
		defer t.wg.Done()
		p.finish(p.wait(t.runner))
	}()
	return p, nil
}

// wait pumps output into the ring buffers until the command ends, enforcing
// the spec's timeout if it has one.
func (p *backgroundProcess) wait(runner *process.Runner) process.Result {
	begin := time.Now()
	pumped := make(chan struct{})
	go func() { p.cmd.PumpOutput(p.emit); close(pumped) }()
	timedOut := false
	if p.spec.Timeout > 0 {
		t := time.NewTimer(p.spec.Timeout)
		select {
		case <-p.cmd.Exited():
		case <-t.C:
			timedOut = true
			p.cmd.Terminate(runner.KillGrace())
		}
		t.Stop()
	}
	<-p.cmd.Exited()
	<-pumped
	res := process.Result{ExitCode: p.cmd.ExitCode(), TimedOut: timedOut, Duration: time.Since(begin)}
	if timedOut {
		res.ExitCode = 124
	}
	runner.Observe("background", res)
	return res
}

func (p *backgroundProcess) finish(res process.Result) {
	p.mu.Lock()
	p.running, p.exitCode, p.timedOut, p.exitedAt = false, res.ExitCode, res.TimedOut, time.Now().UTC()
	p.notifyLocked()
	p.mu.Unlock()
	close(p.done)
}

// evictLocked forgets the oldest exited processes beyond the cap.
func (t *processTable) evictLocked() {
	var exited []*backgroundProcess
	for _, p := range t.m {
		if !p.isRunning() {
			exited = append(exited, p)
		}
	}
	if len(exited) < maxExitedProcesses {
		return
	}
	slices.SortFunc(exited, func(a, b *backgroundProcess) int { return a.startedAt.Compare(b.startedAt) })
	for _, p := range exited[:len(exited)-maxExitedProcesses+1] {
		delete(t.m, p.id)
	}
}

// closeAll kills every running process and waits for them.
func (t *processTable) closeAll() {
	t.mu.Lock()
	t.closed = true
	procs := make([]*backgroundProcess, 0, len(t.m))
	for _, p := range t.m {
		procs = append(procs, p)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		if p.cmd != nil && p.isRunning() {
			wg.Go(func() { p.cmd.Terminate(t.runner.KillGrace()) })
		}
	}
	wg.Wait()
	t.wg.Wait()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
