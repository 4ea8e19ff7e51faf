package process_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// eventTimeout bounds every wait for something a child does. It is generous on purpose: the
// tests wait on events, never on durations, and the machine may be loaded.
const eventTimeout = 30 * time.Second

// newRunner is a Runner over a fresh root directory, with a 1 KiB output cap and a short kill
// grace (the grace only bounds how long a TERM-ignoring child is given, never what is checked).
func newRunner(t testing.TB, configure ...func(*process.Config)) *process.Runner {
	t.Helper()
	r, _ := newRunnerWithRoot(t, configure...)
	return r
}

// newRunnerWithRoot is newRunner and the real path of its root directory.
func newRunnerWithRoot(t testing.TB, configure ...func(*process.Config)) (*process.Runner, string) {
	t.Helper()
	fsys, err := rootfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := process.Config{Shell: "/bin/sh", MaxOutput: 1024, KillGrace: 100 * time.Millisecond}
	for _, f := range configure {
		f(&cfg)
	}
	return process.NewRunner(fsys.Resolver(), cfg), fsys.Dir()
}

// buildSpec is req validated, failing the test when it is not.
func buildSpec(t *testing.T, r *process.Runner, req *wire.ExecRequest) *process.Spec {
	t.Helper()
	sp, err := r.BuildSpec(context.Background(), req, time.Hour)
	if err != nil {
		t.Fatalf("BuildSpec(%+v): %v", req, err)
	}
	return sp
}

// output collects a command's streams as they arrive and lets a test wait for what it expects.
type output struct {
	mu      sync.Mutex
	streams [2]bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) emit(stream int, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.streams[stream].Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *output) String(stream int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[stream].String()
}

// waitFor waits until stream holds want and returns the stream so far.
func (o *output) waitFor(t *testing.T, stream int, want string) string {
	t.Helper()
	return o.waitUntil(t, stream, fmt.Sprintf("%q", want), func(s string) bool { return strings.Contains(s, want) })
}

// waitForNumber waits for a whole line "<prefix><number>" on stream and returns the number (a
// pid the child printed). A terminal ends lines with \r\n.
func (o *output) waitForNumber(t *testing.T, stream int, prefix string) int {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `(\d+)\r?$`)
	m := re.FindStringSubmatch(o.waitUntil(t, stream, re.String(), re.MatchString))
	n, _ := strconv.Atoi(m[1])
	return n
}

func (o *output) waitUntil(t *testing.T, stream int, what string, ok func(string) bool) string {
	t.Helper()
	deadline := time.After(eventTimeout)
	for {
		o.mu.Lock()
		got, changed := o.streams[stream].String(), o.changed
		o.mu.Unlock()
		if ok(got) {
			return got
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("stream %d never showed %s within %s; it holds %q", stream, what, eventTimeout, got)
		}
	}
}

// run starts Run in the background; the returned channel yields its Result, and onStart's
// Command is sent on started.
func run(ctx context.Context, r *process.Runner, sp *process.Spec, keepStdin bool, out *output) (<-chan process.Result, <-chan *process.Command) {
	done, started := make(chan process.Result, 1), make(chan *process.Command, 1)
	go func() {
		done <- r.Run(ctx, sp, keepStdin, out.emit, func(c *process.Command) { started <- c })
	}()
	return done, started
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(eventTimeout):
		t.Fatalf("%s did not happen within %s", what, eventTimeout)
	}
	panic("unreachable")
}

// procStat is the part of /proc/<pid>/stat the tests read.
type procStat struct {
	pid, ppid, pgrp int
	state           byte
}

// processes lists every process /proc shows.
func processes(t *testing.T) []procStat {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []procStat
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid pgrp session ...
		if len(f) < 3 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		out = append(out, procStat{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0]})
	}
	return out
}

// alive reports whether pid runs (a zombie does not: it is dead, waiting for its parent).
func alive(t *testing.T, pid int) bool {
	t.Helper()
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	for _, p := range processes(t) {
		if p.pid == pid {
			return p.state != 'Z'
		}
	}
	return false
}

// waitDead waits until none of pids runs. A killed process is gone as soon as the kernel has
// delivered SIGKILL, but an orphan's death is only visible once it has been scheduled: wait.
func waitDead(t *testing.T, why string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(eventTimeout)
	for _, pid := range pids {
		for alive(t, pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: process %d still runs after %s", why, pid, eventTimeout)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// groupMembers are the live processes of process group pgrp.
func groupMembers(t *testing.T, pgrp int) []int {
	t.Helper()
	var out []int
	for _, p := range processes(t) {
		if p.pgrp == pgrp && p.state != 'Z' {
			out = append(out, p.pid)
		}
	}
	return out
}

// zombieChildren are this test binary's children that exited and were never reaped.
func zombieChildren(t *testing.T) []int {
	t.Helper()
	var out []int
	for _, p := range processes(t) {
		if p.ppid == os.Getpid() && p.state == 'Z' {
			out = append(out, p.pid)
		}
	}
	return out
}
