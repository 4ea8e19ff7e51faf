package sandboxd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/wire"
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
	s      *Server
	mu     sync.Mutex
	m      map[string]*backgroundProcess
	closed bool
	wg     sync.WaitGroup // one per process until it is reaped
}

func newProcessTable(s *Server) *processTable {
	return &processTable{s: s, m: map[string]*backgroundProcess{}}
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
	size := t.s.cfg.ProcessLogBytes
	p.out = [2]*ringBuffer{newRingBuffer(size), newRingBuffer(size)}
	c, startErr := t.s.runner.Start(sp, false)
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
		p.finish(p.wait(t.s))
	}()
	return p, nil
}

// wait pumps output into the ring buffers until the command ends, enforcing
// the spec's timeout if it has one.
func (p *backgroundProcess) wait(s *Server) process.Result {
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
			p.cmd.Terminate(s.runner.KillGrace())
		}
		t.Stop()
	}
	<-p.cmd.Exited()
	<-pumped
	res := process.Result{ExitCode: p.cmd.ExitCode(), TimedOut: timedOut, Duration: time.Since(begin)}
	if timedOut {
		res.ExitCode = 124
	}
	s.runner.Observe("background", res)
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
			wg.Go(func() { p.cmd.Terminate(t.s.runner.KillGrace()) })
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

// ---- handlers ----

func (s *Server) handleStartProcess(w http.ResponseWriter, r *http.Request) {
	sp, err := s.readExecRequest(r, 0) // no default timeout: it outlives the request
	if err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	p, err := s.procs.startProcess(sp)
	if err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	s.log.Info("background process started", "id", p.id, "pid", p.pid)
	respond.JSON(w, http.StatusCreated, wire.StartProcessResponse{ID: p.id, PID: p.pid})
}

func (s *Server) handleListProcesses(w http.ResponseWriter, r *http.Request) {
	s.procs.mu.Lock()
	procs := make([]*backgroundProcess, 0, len(s.procs.m))
	for _, p := range s.procs.m {
		procs = append(procs, p)
	}
	s.procs.mu.Unlock()
	slices.SortFunc(procs, func(a, b *backgroundProcess) int {
		if c := a.startedAt.Compare(b.startedAt); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	out := wire.ProcessList{Processes: make([]wire.Process, 0, len(procs))}
	for _, p := range procs {
		out.Processes = append(out.Processes, p.info())
	}
	respond.JSON(w, http.StatusOK, out)
}

// processArg splits "{id}" or "{id}/{action}" and finds the process.
func (s *Server) processArg(w http.ResponseWriter, arg string) (*backgroundProcess, string, bool) {
	id, action, _ := strings.Cut(arg, "/")
	p := s.procs.get(id)
	if p == nil {
		respond.Error(w, http.StatusNotFound, "process not found")
		return nil, "", false
	}
	return p, action, true
}

// handleProcessGet serves GET /v1/processes/{id} and /v1/processes/{id}/logs.
func (s *Server) handleProcessGet(w http.ResponseWriter, r *http.Request, arg string) {
	p, action, ok := s.processArg(w, arg)
	if !ok {
		return
	}
	switch action {
	case "":
		respond.JSON(w, http.StatusOK, p.info())
	case "logs":
		if r.URL.Query().Get("follow") == "true" {
			s.followLogs(w, r, p)
			return
		}
		p.mu.Lock()
		stdout, _, lostOut := p.out[0].readFrom(0)
		stderr, _, lostErr := p.out[1].readFrom(0)
		p.mu.Unlock()
		respond.JSON(w, http.StatusOK, wire.ProcessLogs{
			Stdout: string(stdout), Stderr: string(stderr),
			StdoutTruncated: lostOut, StderrTruncated: lostErr,
		})
	default:
		respond.Error(w, http.StatusNotFound, "not found")
	}
}

// followLogs streams retained and new output as NDJSON frames until the
// process exits (then an exit frame) or the client leaves.
func (s *Server) followLogs(w http.ResponseWriter, r *http.Request, p *backgroundProcess) {
	nw := respond.NDJSON(w)
	var off [2]int64
	for {
		p.mu.Lock()
		var chunks [2][]byte
		for i := range chunks {
			chunks[i], off[i], _ = p.out[i].readFrom(off[i])
		}
		running, code, timedOut, changed := p.running, p.exitCode, p.timedOut, p.changed
		p.mu.Unlock()
		for i, c := range chunks {
			if len(c) > 0 {
				if err := nw.Write(wire.Frame{Type: streamFrameTypes[i], Data: c}, false); err != nil {
					return
				}
			}
		}
		if !running {
			_ = nw.Write(wire.Frame{Type: wire.FrameExit, ExitCode: code, TimedOut: timedOut}, true)
			return
		}
		if err := nw.Flush(); err != nil {
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

// handleProcessPost serves POST /v1/processes/{id}/signal.
func (s *Server) handleProcessPost(w http.ResponseWriter, r *http.Request, arg string) {
	p, action, ok := s.processArg(w, arg)
	if !ok {
		return
	}
	if action != "signal" {
		respond.Error(w, http.StatusNotFound, "not found")
		return
	}
	var req wire.SignalRequest
	if err := respond.DecodeJSON(r, &req); err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	sig, err := parseSignal(req.Signal)
	if err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	if p.cmd == nil {
		respond.Error(w, http.StatusConflict, "process has exited")
		return
	}
	if err := p.cmd.Signal(sig); err != nil {
		respond.Error(w, http.StatusConflict, err.Error())
		return
	}
	respond.JSON(w, http.StatusOK, p.info())
}

// handleProcessDelete serves DELETE /v1/processes/{id}: kill the group if it
// still runs, wait for the exit, forget the process and return its final
// state.
func (s *Server) handleProcessDelete(w http.ResponseWriter, r *http.Request, arg string) {
	p, action, ok := s.processArg(w, arg)
	if !ok {
		return
	}
	if action != "" {
		respond.Error(w, http.StatusNotFound, "not found")
		return
	}
	if p.cmd != nil && p.isRunning() {
		go p.cmd.Terminate(s.runner.KillGrace())
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.runner.KillGrace()+10*time.Second)
	defer cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
		respond.Error(w, http.StatusServiceUnavailable, "process did not exit")
		return
	}
	s.procs.mu.Lock()
	delete(s.procs.m, p.id)
	s.procs.mu.Unlock()
	respond.JSON(w, http.StatusOK, p.info())
}
