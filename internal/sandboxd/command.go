package sandboxd

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/wire"
)

// drainGrace is how long output is still read after the command exited. A
// grandchild left running in the background may hold the pipes open forever;
// we stop waiting for it rather than hang the request.
const drainGrace = time.Second

// Stream indexes used by emit callbacks.
const (
	streamStdout = 0
	streamStderr = 1
)

// execSpec is a validated ExecRequest.
type execSpec struct {
	argv      []string // argv[0] as the client gave it
	path      string   // resolved executable, "" when not found
	env       []string
	dir       string // absolute
	cwd       string // root-relative, for display
	timeout   time.Duration
	stdin     []byte // nil: /dev/null (or an open pipe for WebSocket sessions)
	maxOutput int64
	tty       bool
	cols      uint16
	rows      uint16
	req       *wire.ExecRequest
}

// buildSpec validates req. defTimeout applies when the request has none.
func (s *Server) buildSpec(req *wire.ExecRequest, defTimeout time.Duration) (*execSpec, error) {
	sp := &execSpec{req: req, tty: req.TTY, cols: req.Cols, rows: req.Rows}
	switch {
	case len(req.Argv) > 0 && req.Command != "":
		return nil, respond.BadRequest("set either argv or command, not both")
	case len(req.Argv) > 0:
		if req.Argv[0] == "" {
			return nil, respond.BadRequest("argv[0] is empty")
		}
		sp.argv = append([]string(nil), req.Argv...)
	case req.Command != "":
		sp.argv = []string{s.cfg.Shell, "-c", req.Command}
	default:
		return nil, respond.BadRequest("argv or command is required")
	}
	for _, a := range sp.argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, respond.BadRequest("arguments must not contain NUL bytes")
		}
	}

	env, err := mergeEnv(baseEnv(), req.Env)
	if err != nil {
		return nil, err
	}
	if sp.tty && envValue(env, "TERM") == "" {
		env = append(env, "TERM=xterm-256color")
	}
	sp.env = env

	rel, err := s.fs.Resolve(req.Cwd, true)
	if err != nil {
		return nil, err
	}
	sp.dir = filepath.Join(s.fs.Dir(), rel)
	sp.cwd = rootfs.Display(rel)
	fi, err := os.Stat(sp.dir)
	if err != nil {
		return nil, respond.BadRequest("cwd %q: %v", req.Cwd, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return nil, respond.BadRequest("cwd %q is not a directory", req.Cwd)
	}

	switch {
	case req.TimeoutSeconds < 0:
		return nil, respond.BadRequest("timeoutSeconds must not be negative")
	case req.TimeoutSeconds > 0:
		sp.timeout = time.Duration(req.TimeoutSeconds * float64(time.Second))
	default:
		sp.timeout = defTimeout
	}

	switch {
	case req.Stdin != "" && req.StdinBase64 != "":
		return nil, respond.BadRequest("set either stdin or stdinBase64, not both")
	case req.Stdin != "":
		sp.stdin = []byte(req.Stdin)
	case req.StdinBase64 != "":
		b, err := base64.StdEncoding.DecodeString(req.StdinBase64)
		if err != nil {
			return nil, respond.BadRequest("stdinBase64: %v", err)
		}
		sp.stdin = b
	}

	sp.maxOutput = s.cfg.MaxOutput
	switch {
	case req.MaxOutputBytes < 0:
		return nil, respond.BadRequest("maxOutputBytes must not be negative")
	case req.MaxOutputBytes > 0 && req.MaxOutputBytes < sp.maxOutput:
		sp.maxOutput = req.MaxOutputBytes
	}
	sp.path = lookPath(sp.argv[0], envValue(env, "PATH"), sp.dir)
	return sp, nil
}

// baseEnv is the daemon's environment minus its own secret.
func baseEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "SANDBOXD_TOKEN=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// mergeEnv overlays extra on base; later entries win, keys are sorted so
// the child sees a stable order.
func mergeEnv(base []string, extra map[string]string) ([]string, error) {
	if len(extra) == 0 {
		return base, nil
	}
	keys := make([]string, 0, len(extra))
	for k, v := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return nil, respond.BadRequest("invalid environment variable %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(base)+len(keys))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := extra[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range keys {
		out = append(out, k+"="+extra[k])
	}
	return out, nil
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath searches the request's PATH (not the daemon's, which exec.Command
// would use) and returns "" when nothing executable is found.
func lookPath(file, pathEnv, dir string) string {
	if strings.Contains(file, "/") {
		return file
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// command is a started child process, leader of its own process group (or
// session, with a TTY).
type command struct {
	cmd     *exec.Cmd
	pid     int
	outputs []*os.File // read ends: stdout, stderr; or just the PTY master
	stdin   *os.File   // write end of the stdin pipe, or the PTY master
	pty     *os.File   // PTY master, nil without a TTY
	exited  chan struct{}
	state   *os.ProcessState // valid once exited is closed

	stdinMu     sync.Mutex
	stdinClosed bool
	// stdinQ feeds interactive stdin through one writer goroutine, so input
	// keeps its order and a child that stops reading cannot stall the
	// session's control frames. nil unless the session keeps stdin open.
	stdinQ chan stdinChunk
}

type stdinChunk struct {
	data []byte
	eof  bool
}

// startError is a command that could not start; it is reported like a shell
// would, as exit code 127 (not found) or 126 (not executable).
type startError struct {
	code int
	msg  string
}

func (e *startError) Error() string { return e.msg }

// start launches sp. keepStdin leaves a stdin pipe open for the caller
// (WebSocket sessions); otherwise stdin is sp.stdin followed by EOF.
func (s *Server) start(sp *execSpec, keepStdin bool) (*command, error) {
	if sp.path == "" {
		return nil, &startError{127, fmt.Sprintf("sandboxd: %s: command not found\n", sp.argv[0])}
	}
	cmd := &exec.Cmd{Path: sp.path, Args: sp.argv, Env: sp.env, Dir: sp.dir}
	c := &command{cmd: cmd, exited: make(chan struct{})}
	var err error
	if sp.tty {
		err = c.startPTY(sp)
	} else {
		err = c.startPipes(sp, keepStdin)
	}
	if err != nil {
		code := 126
		if errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		return nil, &startError{code, fmt.Sprintf("sandboxd: %s: %v\n", sp.argv[0], unwrapExecErr(err))}
	}
	c.pid = cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	switch {
	case keepStdin:
		c.stdinQ = make(chan stdinChunk, 256)
		if sp.stdin != nil {
			c.stdinQ <- stdinChunk{data: sp.stdin}
		}
		go c.stdinWriter()
	case sp.stdin != nil:
		data := sp.stdin
		go func() {
			_, _ = c.writeStdin(data)
			c.closeStdin()
		}()
	}
	return c, nil
}

// stdinWriter drains stdinQ into the child until the child exits.
func (c *command) stdinWriter() {
	for {
		select {
		case ch := <-c.stdinQ:
			if ch.eof {
				c.closeStdin()
			} else {
				_, _ = c.writeStdin(ch.data) // fails once the child is gone
			}
		case <-c.exited:
			return
		}
	}
}

// sendStdin queues interactive input (or EOF) behind what came before. It
// blocks only while the queue is full, and never after the child exited.
func (c *command) sendStdin(ch stdinChunk) {
	if c.stdinQ == nil {
		return
	}
	select {
	case c.stdinQ <- ch:
	case <-c.exited:
	}
}

func unwrapExecErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (c *command) startPipes(sp *execSpec, withStdin bool) error {
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close() // the child has its own copies now
		}
	}()
	fail := func(err error) error {
		for _, f := range c.outputs {
			f.Close()
		}
		if c.stdin != nil {
			c.stdin.Close()
		}
		return err
	}
	for range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		c.outputs = append(c.outputs, r)
		childEnds = append(childEnds, w)
	}
	c.cmd.Stdout, c.cmd.Stderr = childEnds[0], childEnds[1]
	if withStdin || sp.stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		c.stdin = w
		childEnds = append(childEnds, r)
		c.cmd.Stdin = r
	}
	if err := c.cmd.Start(); err != nil {
		return fail(err)
	}
	return nil
}

// writeStdin writes to the child's stdin; it fails once stdin is closed.
func (c *command) writeStdin(p []byte) (int, error) {
	c.stdinMu.Lock()
	f, closed := c.stdin, c.stdinClosed
	c.stdinMu.Unlock()
	if f == nil || closed {
		return 0, os.ErrClosed
	}
	// Not under the lock: a child that never reads would block closeStdin.
	return f.Write(p)
}

// closeStdin sends EOF: closes the pipe, or types ^D on a terminal.
func (c *command) closeStdin() {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	if c.stdin == nil || c.stdinClosed {
		return
	}
	if c.pty != nil {
		_, _ = c.pty.Write([]byte{4})
		return
	}
	c.stdinClosed = true
	c.stdin.Close()
}

// signal delivers sig to the whole process group.
func (c *command) signal(sig syscall.Signal) error {
	select {
	case <-c.exited:
		return errors.New("process has exited")
	default:
	}
	return syscall.Kill(-c.pid, sig)
}

// terminate sends SIGTERM to the group, then SIGKILL after grace (or as soon
// as the leader is gone, to sweep up children that outlived it).
func (c *command) terminate(grace time.Duration) {
	_ = syscall.Kill(-c.pid, syscall.SIGTERM)
	_ = syscall.Kill(-c.pid, syscall.SIGCONT) // a stopped group cannot act on TERM
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.exited:
	case <-t.C:
	}
	c.kill()
}

// kill sends SIGKILL to the group (and with a TTY, to the whole session,
// since job control moves jobs to other groups).
func (c *command) kill() {
	_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	if c.pty != nil {
		killSession(c.pid)
	}
}

// exitCode follows the shell: 128+n for a signal.
func exitCode(st *os.ProcessState) int {
	if st == nil {
		return -1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// termSignal is the signal that killed the process, 0 if it exited.
func termSignal(st *os.ProcessState) int {
	if st == nil {
		return 0
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int(ws.Signal())
	}
	return 0
}

// result is how a command ended.
type result struct {
	exitCode int
	signal   int // the signal that killed it, 0 if it exited
	timedOut bool
	duration time.Duration
	startErr *startError // the command could not start (exitCode 127 or 126)
}

var readBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pumpOutput reads every output stream in its own goroutine and hands each
// chunk to emit (which must copy it to keep it). It returns once all streams
// reached EOF, or, after the command exited, once they stayed idle for
// drainGrace.
func (c *command) pumpOutput(emit func(stream int, p []byte)) {
	var wg sync.WaitGroup
	var busy atomic.Int32     // readers handing a chunk to emit
	var lastData atomic.Int64 // when a reader last got data (UnixNano)
	for i, f := range c.outputs {
		wg.Go(func() {
			bp := readBufPool.Get().(*[]byte)
			defer readBufPool.Put(bp)
			buf := *bp
			retried := false
			for {
				n, err := f.Read(buf)
				if n > 0 {
					retried = false
					busy.Add(1)
					emit(i, buf[:n]) // may block on a slow client
					lastData.Store(time.Now().UnixNano())
					busy.Add(-1)
				}
				if err != nil {
					// A PTY master can report EIO for a closed terminal while
					// the last bytes written before the close are still being
					// handed over; one more read returns them (or EIO again).
					if c.pty != nil && !retried && errors.Is(err, syscall.EIO) {
						retried = true
						continue
					}
					return
				}
			}
		})
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-c.exited:
		// Output still flowing is drained in full; only a pipe that stays
		// idle for drainGrace is cut.
		t := time.NewTimer(drainGrace)
	drain:
		for {
			select {
			case <-all:
				break drain
			case <-t.C:
			}
			idle := time.Since(time.Unix(0, lastData.Load()))
			if busy.Load() == 0 && idle >= drainGrace {
				for _, f := range c.outputs {
					f.Close() // unblocks the readers: the files are pollable
				}
				<-all
				break drain
			}
			t.Reset(max(drainGrace-idle, 10*time.Millisecond))
		}
		t.Stop()
	}
	if c.pty != nil {
		// Closing the master hangs up the terminal and SIGHUPs the session:
		// a program that closes its stdio before exiting (coreutils do, in
		// atexit) would be reported as killed by SIGHUP.
		<-c.exited
	}
	for _, f := range c.outputs {
		f.Close()
	}
	c.stdinMu.Lock()
	if c.stdin != nil && !c.stdinClosed && c.pty == nil {
		c.stdinClosed = true
		c.stdin.Close()
	}
	c.stdinMu.Unlock()
}

// run starts sp and waits for it, killing the process group when ctx ends
// or the timeout expires. emit receives output as it arrives; onStart (may
// be nil) sees the command once it runs. A command that cannot start is
// reported through emit as stderr plus exit code 127/126.
func (s *Server) run(ctx context.Context, sp *execSpec, keepStdin bool, emit func(int, []byte), onStart func(*command)) result {
	begin := time.Now()
	c, err := s.start(sp, keepStdin)
	if err != nil {
		var se *startError
		if !errors.As(err, &se) {
			se = &startError{126, err.Error()}
		}
		emit(streamStderr, []byte(se.msg))
		return result{exitCode: se.code, duration: time.Since(begin), startErr: se}
	}
	if !s.trackForeground(c) {
		c.kill()
	}
	defer s.untrackForeground(c)
	if onStart != nil {
		onStart(c)
	}

	var timeout <-chan time.Time
	if sp.timeout > 0 {
		t := time.NewTimer(sp.timeout)
		defer t.Stop()
		timeout = t.C
	}
	pumped := make(chan struct{})
	go func() { c.pumpOutput(emit); close(pumped) }()

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
		go func() { c.terminate(s.cfg.KillGrace); close(killed) }()
	}
	<-c.exited
	<-pumped
	if killing {
		<-killed // the group is gone too, not just the leader
	}
	res := result{exitCode: exitCode(c.state), signal: termSignal(c.state), timedOut: timedOut, duration: time.Since(begin)}
	if timedOut {
		res.exitCode = 124 // like coreutils timeout(1)
	}
	return res
}
