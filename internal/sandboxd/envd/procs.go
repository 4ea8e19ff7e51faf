package envd

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process"
)

// maxEndedProcs bounds how many finished processes stay reachable by
// Connect (which then replays their end event); the oldest go first.
const maxEndedProcs = 256

// subscriber is one stream following a process's events.
type subscriber struct {
	ch   chan *pb.ProcessEvent
	gone chan struct{} // closed when the stream stops reading
}

// proc is a command started through Start: its description, the streams
// following it and, once it ended, its end event.
type proc struct {
	cmd     *process.Command
	info    *pb.ProcessInfo
	pty     bool
	endedAt time.Time

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	end  *pb.ProcessEvent_EndEvent // nil while running
	done chan struct{}             // closed once end is set and sent
}

// subscribe adds a follower; it returns nil once the process ended, and
// the end event then.
func (p *proc) subscribe() (*subscriber, *pb.ProcessEvent_EndEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		return nil, p.end
	}
	s := &subscriber{ch: make(chan *pb.ProcessEvent, 64), gone: make(chan struct{})}
	p.subs[s] = struct{}{}
	return s, nil
}

func (p *proc) unsubscribe(s *subscriber) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
	close(s.gone)
}

// publish hands ev to every follower. A slow follower slows the output
// pump (backpressure reaches the command's pipe) but a departed one never
// blocks it.
func (p *proc) publish(ev *pb.ProcessEvent) {
	p.mu.Lock()
	subs := p.followersLocked()
	p.mu.Unlock()
	send(subs, ev)
}

func (p *proc) followersLocked() []*subscriber {
	subs := make([]*subscriber, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	return subs
}

func send(subs []*subscriber, ev *pb.ProcessEvent) {
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.gone:
		}
	}
}

// emit turns a chunk of output into a data event.
func (p *proc) emit(stream int, b []byte) {
	data := slices.Clone(b)
	ev := &pb.ProcessEvent_DataEvent{}
	switch {
	case p.pty:
		ev.Output = &pb.ProcessEvent_DataEvent_Pty{Pty: data}
	case stream == process.Stderr:
		ev.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: data}
	default:
		ev.Output = &pb.ProcessEvent_DataEvent_Stdout{Stdout: data}
	}
	p.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: ev}})
}

// run pumps the output until the command ends, killing its group after
// timeout (0: never), then publishes the end event.
func (p *proc) run(timeout, grace time.Duration) {
	pumped := make(chan struct{})
	go func() { p.cmd.PumpOutput(p.emit); close(pumped) }()
	if timeout > 0 {
		t := time.NewTimer(timeout)
		select {
		case <-p.cmd.Exited():
		case <-t.C:
			p.cmd.Terminate(grace)
		}
		t.Stop()
	}
	<-p.cmd.Exited()
	<-pumped
	end := endEvent(p.cmd)
	// Set under the lock that subscribe takes: a later follower gets the
	// end event from subscribe, an earlier one from this send.
	p.mu.Lock()
	p.end, p.endedAt = end, time.Now()
	subs := p.followersLocked()
	p.mu.Unlock()
	send(subs, &pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}})
	close(p.done)
}

// endEvent describes how the command ended the way envd does: Go's exit
// code (-1 when killed by a signal), whether it exited by itself, the
// wait status in words, and that status again as the error when it is not
// a clean exit.
func endEvent(c *process.Command) *pb.ProcessEvent_EndEvent {
	st := c.State()
	end := &pb.ProcessEvent_EndEvent{ExitCode: int32(st.ExitCode()), Exited: st.Exited(), Status: st.String()}
	if !st.Success() {
		msg := st.String()
		end.Error = &msg
	}
	return end
}

// procTable holds the processes started through Start.
type procTable struct {
	mu     sync.Mutex
	m      map[uint32]*proc
	closed bool
	wg     sync.WaitGroup
}

func newProcTable() *procTable { return &procTable{m: map[uint32]*proc{}} }

// add registers p; it fails once the table is closed.
func (t *procTable) add(p *proc) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("server is shutting down")
	}
	t.evictLocked()
	t.m[p.info.Pid] = p
	t.wg.Add(1)
	return nil
}

// find resolves a selector to a process, running or recently ended.
func (t *procTable) find(sel *pb.ProcessSelector) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *pb.ProcessSelector_Pid:
		if p, ok := t.m[s.Pid]; ok {
			return p, nil
		}
		return nil, notFoundf("process with pid %d not found", s.Pid)
	case *pb.ProcessSelector_Tag:
		var found *proc
		for _, p := range t.m {
			if p.info.GetTag() == s.Tag && (found == nil || running(p) && !running(found)) {
				found = p
			}
		}
		if found == nil {
			return nil, notFoundf("process with tag %q not found", s.Tag)
		}
		return found, nil
	default:
		return nil, invalidf("a process selector (pid or tag) is required")
	}
}

// findRunning is find, refusing processes that already ended.
func (t *procTable) findRunning(sel *pb.ProcessSelector) (*proc, error) {
	p, err := t.find(sel)
	if err == nil && !running(p) {
		return nil, notFoundf("process %d has ended", p.info.Pid)
	}
	return p, err
}

func running(p *proc) bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// list describes the running processes, by pid.
func (t *procTable) list() []*pb.ProcessInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []*pb.ProcessInfo{}
	for _, p := range t.m {
		if running(p) {
			out = append(out, p.info)
		}
	}
	slices.SortFunc(out, func(a, b *pb.ProcessInfo) int { return int(a.Pid) - int(b.Pid) })
	return out
}

// evictLocked forgets the oldest ended processes beyond the cap, and any
// ended process whose pid the system gave to a newer one.
func (t *procTable) evictLocked() {
	var ended []*proc
	for _, p := range t.m {
		if !running(p) {
			ended = append(ended, p)
		}
	}
	if len(ended) < maxEndedProcs {
		return
	}
	slices.SortFunc(ended, func(a, b *proc) int { return a.endedAt.Compare(b.endedAt) })
	for _, p := range ended[:len(ended)-maxEndedProcs+1] {
		delete(t.m, p.info.Pid)
	}
}

// closeAll refuses new processes, kills the running ones' groups and waits
// until every one ended.
func (t *procTable) closeAll(grace time.Duration) {
	t.mu.Lock()
	t.closed = true
	procs := make([]*proc, 0, len(t.m))
	for _, p := range t.m {
		procs = append(procs, p)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		if running(p) {
			wg.Go(func() { p.cmd.Terminate(grace) })
		}
	}
	wg.Wait()
	t.wg.Wait()
}

// signalOf maps envd's signals onto the system's.
func signalOf(s pb.Signal) (syscall.Signal, error) {
	switch s {
	case pb.Signal_SIGNAL_SIGKILL:
		return syscall.SIGKILL, nil
	case pb.Signal_SIGNAL_SIGTERM:
		return syscall.SIGTERM, nil
	default:
		return 0, invalidf("unsupported signal %v: send SIGNAL_SIGTERM or SIGNAL_SIGKILL", s)
	}
}
