package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// startPTY runs the command on a new pseudo-terminal as the leader of a new
// session, with the terminal as stdin, stdout and stderr.
func (c *Command) startPTY(sp *Spec) error {
	master, tty, err := openPTY()
	if err != nil {
		return err
	}
	defer func() { _ = tty.Close() }() // the child keeps its own copy
	rows, cols := sp.Rows, sp.Cols
	if rows == 0 {
		rows = 24
	}
	if cols == 0 {
		cols = 80
	}
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		_ = master.Close() // failing already
		return err
	}
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = tty, tty, tty
	// Setsid makes the child its own process group too, so kill(-pid) works.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := c.cmd.Start(); err != nil {
		_ = master.Close() // failing already
		return err
	}
	c.pty = master
	c.stdin = master
	c.outputs = []*os.File{master}
	return nil
}

// openPTY opens a terminal pair. creack/pty leaves the master in blocking
// mode (it calls Fd), where Close cannot interrupt a pending Read; we re-wrap
// a non-blocking duplicate so reads go through the runtime poller and can be
// cancelled.
func openPTY() (master, tty *os.File, err error) {
	m, t, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	_ = m.Close() // the duplicate is what we keep
	if err == nil {
		err = unix.SetNonblock(fd, true)
		if err != nil {
			_ = unix.Close(fd) // failing already
		}
	}
	if err != nil {
		_ = t.Close() // failing already
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), t, nil
}

// Resize sets the terminal size; it is a no-op without a TTY.
func (c *Command) Resize(cols, rows uint16) error {
	if c.pty == nil {
		return nil
	}
	rc, err := c.pty.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
	if err != nil {
		return err
	}
	return ierr
}

// killSession SIGKILLs every process of session sid, found through /proc.
// Interactive shells put background jobs in their own process groups, which
// a group kill would miss.
func killSession(sid int) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// The command name may contain spaces and parentheses; fields
		// after the last ')' are: state ppid pgrp session ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 4 {
			continue
		}
		if sess, _ := strconv.Atoi(f[3]); sess == sid {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
