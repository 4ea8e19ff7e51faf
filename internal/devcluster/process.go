package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procRecord is what the state dir remembers of a started process: enough to find it again and
// to be sure a pid still belongs to it (pids get reused).
type procRecord struct {
	Name      string `json:"name"`
	PID       int    `json:"pid"`
	Exe       string `json:"exe"`
	StartTime uint64 `json:"startTime"` // /proc/<pid>/stat field 22, clock ticks after boot
}

func (c *Config) pidFile(name string) string { return c.path("pids", name+".json") }
func (c *Config) logFile(name string) string { return c.path("logs", name+".log") }

// running returns the record of a live process started by us under that name, or nil.
func (c *Config) running(name string) *procRecord {
	data, err := os.ReadFile(c.pidFile(name))
	if err != nil {
		return nil
	}
	var r procRecord
	if json.Unmarshal(data, &r) != nil || !r.alive() {
		return nil
	}
	return &r
}

func (r *procRecord) alive() bool {
	st, ok := procStat(r.PID)
	return ok && st.state != 'Z' && st.start == r.StartTime
}

type statInfo struct {
	state byte
	start uint64
}

func procStat(pid int) (statInfo, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return statInfo{}, false
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return statInfo{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return statInfo{}, false
	}
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return statInfo{state: f[0][0], start: start}, true
}

// start runs exe detached (own session, output appended to logs/<name>.log) so it outlives
// this process, and records its pid. env entries are added to ours.
func (c *Config) start(name, exe string, args []string, env ...string) (*procRecord, error) {
	for _, d := range []string{"pids", "logs"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	logf, err := os.OpenFile(c.logFile(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n=== %s %s %s\n", time.Now().Format(time.RFC3339), exe, strings.Join(args, " "))
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	// Reap it if it dies while we still run; once we exit, init adopts it.
	go func() { _ = cmd.Wait() }()
	st, _ := procStat(cmd.Process.Pid)
	r := &procRecord{Name: name, PID: cmd.Process.Pid, Exe: exe, StartTime: st.start}
	data, _ := json.Marshal(r)
	if err := os.WriteFile(c.pidFile(name), data, 0o644); err != nil {
		return nil, err
	}
	c.Log.Info("started", "component", name, "pid", r.PID, "log", c.logFile(name))
	return r, nil
}

// stop ends a recorded process: SIGTERM, a bounded wait, then SIGKILL. A record whose pid is
// gone or now belongs to another program is just removed.
func (c *Config) stop(name string) error {
	r := c.running(name)
	defer os.Remove(c.pidFile(name))
	if r == nil {
		return nil
	}
	return c.stopPID(name, r)
}

func (c *Config) stopPID(name string, r *procRecord) error {
	c.Log.Info("stopping", "component", name, "pid", r.PID)
	_ = syscall.Kill(r.PID, syscall.SIGTERM)
	if waitGone(r, c.StopTimeout) {
		return nil
	}
	c.Log.Warn("did not exit after SIGTERM; killing", "component", name, "pid", r.PID, "waited", c.StopTimeout)
	_ = syscall.Kill(r.PID, syscall.SIGKILL)
	if waitGone(r, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", name, r.PID)
}

// waitGone waits until the whole process has exited, its sockets closed: a SIGKILLed thread
// group leader turns zombie while its other threads still hold the listening sockets a moment.
func waitGone(r *procRecord, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if r.exited() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r.exited()
}

func (r *procRecord) exited() bool {
	st, ok := procStat(r.PID)
	if !ok || st.start != r.StartTime {
		return true // gone, or the pid is another process's now
	}
	if st.state != 'Z' {
		return false
	}
	// A zombie leader: its threads may still be exiting.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", r.PID))
	for _, task := range tasks {
		data, err := os.ReadFile(task)
		if i := strings.LastIndexByte(string(data), ')'); err == nil && i >= 0 && i+2 < len(data) && data[i+2] != 'Z' {
			return false
		}
	}
	return true
}

// portFree reports an error naming the port when something already listens on addr.
func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("port %s is busy (%v): stop whatever listens there, or run `dev down` if it is an old cluster", addr, err)
	}
	return l.Close()
}

// waitUntil polls check until it succeeds, the process dies, or the timeout passes, telling
// the user every few seconds what it is waiting for.
func (c *Config) waitUntil(ctx context.Context, what string, proc *procRecord, timeout time.Duration, check func(context.Context) error) error {
	start := time.Now()
	lastSaid := start
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			c.Log.Info("ready", "what", what, "took", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if proc != nil && !proc.alive() {
			return fmt.Errorf("%s exited while starting (last error: %v); log tail:\n%s", proc.Name, last, tail(c.logFile(proc.Name), 25))
		}
		if time.Since(start) > timeout {
			msg := fmt.Sprintf("%s not ready after %s: %v", what, timeout, last)
			if proc != nil {
				msg += "\nlog tail of " + c.logFile(proc.Name) + ":\n" + tail(c.logFile(proc.Name), 25)
			}
			return errors.New(msg)
		}
		if time.Since(lastSaid) > 5*time.Second {
			c.progress("still waiting for %s (%s): %v", what, time.Since(start).Round(time.Second), last)
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runLogged runs a short command, returning its combined output in the error.
func runLogged(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
