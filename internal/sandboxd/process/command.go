// Package process runs sandboxd's commands: it validates exec requests into
// specs, starts children in their own process group (on pipes or a
// pseudo-terminal), feeds their stdin, pumps their output, signals and kills
// the whole group, and runs them to completion under a timeout. It knows
// nothing of the APIs (HTTP, WebSocket, gRPC, legacy) that start them.
package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Stream indexes used by emit callbacks.
const (
	Stdout = 0
	Stderr = 1
)

// Command is a started child process, leader of its own process group (or
// session, with a TTY).
type Command struct {
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

// StartError is a command that could not start; it is reported like a shell
// would, as exit code 127 (not found) or 126 (not executable).
type StartError struct {
	Code int
	Msg  string
}

func (e *StartError) Error() string { return e.Msg }

// Start launches sp. keepStdin leaves stdin open for SendStdin (interactive
// sessions); otherwise stdin is sp.Stdin followed by EOF. A command that
// cannot start is a *StartError.
func (r *Runner) Start(sp *Spec, keepStdin bool) (*Command, error) {
	if sp.Path == "" {
		return nil, &StartError{127, fmt.Sprintf("sandboxd: %s: command not found\n", sp.Argv[0])}
	}
	cmd := &exec.Cmd{Path: sp.Path, Args: sp.Argv, Env: sp.Env, Dir: sp.Dir}
	c := &Command{cmd: cmd, exited: make(chan struct{})}
	var err error
	if sp.TTY {
		err = c.startPTY(sp)
	} else {
		err = c.startPipes(sp, keepStdin)
	}
	if err != nil {
		code := 126
		if errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		return nil, &StartError{code, fmt.Sprintf("sandboxd: %s: %v\n", sp.Argv[0], unwrapExecErr(err))}
	}
	c.pid = cmd.Process.Pid
	go func() {
		_ = cmd.Wait() // the outcome is read from ProcessState
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	switch {
	case keepStdin:
		c.stdinQ = make(chan stdinChunk, 256)
		if sp.Stdin != nil {
			c.stdinQ <- stdinChunk{data: sp.Stdin}
		}
		go c.stdinWriter()
	case sp.Stdin != nil:
		data := sp.Stdin
		go func() {
			_, _ = c.writeStdin(data) // fails only once the child is gone
			c.closeStdin()
		}()
	}
	return c, nil
}

// PID is the child's process ID (and its process group's).
func (c *Command) PID() int { return c.pid }

// Exited is closed once the child has exited and been reaped.
func (c *Command) Exited() <-chan struct{} { return c.exited }

// HasTTY reports whether the child runs on a pseudo-terminal.
func (c *Command) HasTTY() bool { return c.pty != nil }

// State is the child's wait status once it exited and was reaped, else nil.
func (c *Command) State() *os.ProcessState {
	select {
	case <-c.exited:
		return c.state
	default:
		return nil
	}
}

// StdinOpen reports whether input sent with SendStdin can still reach the
// child: it was started with keepStdin and its stdin was not closed.
func (c *Command) StdinOpen() bool {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	return c.stdinQ != nil && c.stdin != nil && !c.stdinClosed
}

// ExitCode follows the shell: 128+n for a signal; -1 before the child
// exited.
func (c *Command) ExitCode() int {
	select {
	case <-c.exited:
		return exitCode(c.state)
	default:
		return -1
	}
}

// stdinWriter drains stdinQ into the child until the child exits.
func (c *Command) stdinWriter() {
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

// SendStdin queues interactive input behind what came before. It blocks
// only while the queue is full, and never after the child exited. It does
// nothing unless the command was started with keepStdin.
func (c *Command) SendStdin(data []byte) { c.send(stdinChunk{data: data}) }

// SendEOF queues the end of input: the pipe is closed, or ^D typed on a
// terminal.
func (c *Command) SendEOF() { c.send(stdinChunk{eof: true}) }

func (c *Command) send(ch stdinChunk) {
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

func (c *Command) startPipes(sp *Spec, withStdin bool) error {
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			_ = f.Close() // the child has its own copies now
		}
	}()
	fail := func(err error) error {
		for _, f := range c.outputs {
			_ = f.Close()
		}
		if c.stdin != nil {
			_ = c.stdin.Close()
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
	if withStdin || sp.Stdin != nil {
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
func (c *Command) writeStdin(p []byte) (int, error) {
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
func (c *Command) closeStdin() {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	if c.stdin == nil || c.stdinClosed {
		return
	}
	if c.pty != nil {
		_, _ = c.pty.Write([]byte{4}) // a gone terminal needs no EOF
		return
	}
	c.stdinClosed = true
	_ = c.stdin.Close()
}

// Signal delivers sig to the whole process group.
func (c *Command) Signal(sig syscall.Signal) error {
	select {
	case <-c.exited:
		return errors.New("process has exited")
	default:
	}
	return syscall.Kill(-c.pid, sig)
}

// Terminate sends SIGTERM to the group, then SIGKILL after grace (or as soon
// as the leader is gone, to sweep up children that outlived it).
func (c *Command) Terminate(grace time.Duration) {
	_ = syscall.Kill(-c.pid, syscall.SIGTERM)
	_ = syscall.Kill(-c.pid, syscall.SIGCONT) // a stopped group cannot act on TERM
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.exited:
	case <-t.C:
	}
	c.Kill()
}

// Kill sends SIGKILL to the group (and with a TTY, to the whole session,
// since job control moves jobs to other groups).
func (c *Command) Kill() {
	_ = syscall.Kill(-c.pid, syscall.SIGKILL) // the group may be gone already
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
