// Package proc supervises the local cluster's processes: each is started detached (its own
// session, output appended to logs/<name>.log) and recorded in pids/<name>.json with its start
// time, so that a later run finds it again, never mistakes a reused pid for it, and stops it.
package proc

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Record is what the state dir remembers of a started process: enough to find it again and
// to be sure a pid still belongs to it (pids get reused).
type Record struct {
	Name      string `json:"name"`
	PID       int    `json:"pid"`
	Exe       string `json:"exe"`
	StartTime uint64 `json:"startTime"` // /proc/<pid>/stat field 22, clock ticks after boot
}

// Supervisor starts and stops the processes recorded under Dir.
type Supervisor struct {
	Dir string
	Log *slog.Logger
	// Out receives progress for people.
	Out         io.Writer
	StopTimeout time.Duration
}

// PidFile is where a process's record is kept.
func (s *Supervisor) PidFile(name string) string { return filepath.Join(s.Dir, "pids", name+".json") }

// LogFile is where a process's output goes.
func (s *Supervisor) LogFile(name string) string { return filepath.Join(s.Dir, "logs", name+".log") }

// Running returns the record of a live process started by us under that name, or nil.
func (s *Supervisor) Running(name string) *Record {
	data, err := os.ReadFile(s.PidFile(name))
	if err != nil {
		return nil
	}
	var r Record
	if json.Unmarshal(data, &r) != nil || !r.Alive() {
		return nil
	}
	return &r
}

// Alive reports whether the recorded process still runs (and is not a zombie).
func (r *Record) Alive() bool {
	st, ok := Stat(r.PID)
	return ok && st.State != 'Z' && st.Start == r.StartTime
}

// StatInfo is what proc reads of /proc/<pid>/stat.
type StatInfo struct {
	State byte
	Start uint64
}

// Stat reads a process's state and start time.
func Stat(pid int) (StatInfo, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return StatInfo{}, false
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return StatInfo{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return StatInfo{}, false
	}
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return StatInfo{State: f[0][0], Start: start}, true
}

// Start runs exe detached (own session, output appended to logs/<name>.log) so it outlives
// this process, and records its pid. env entries are added to ours.
func (s *Supervisor) Start(name, exe string, args []string, env ...string) (*Record, error) {
	for _, d := range []string{"pids", "logs"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	logf, err := os.OpenFile(s.LogFile(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n=== %s %s %s\n", time.Now().Format(time.RFC3339), exe, strings.Join(args, " "))
	closeInheritedOnExec()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	// Reap it if it dies while we still run; once we exit, init adopts it.
	go func() { _ = cmd.Wait() }()
	st, _ := Stat(cmd.Process.Pid)
	r := &Record{Name: name, PID: cmd.Process.Pid, Exe: exe, StartTime: st.Start}
	data, _ := json.Marshal(r)
	if err := os.WriteFile(s.PidFile(name), data, 0o644); err != nil {
		return nil, err
	}
	s.Log.Info("started", "component", name, "pid", r.PID, "log", s.LogFile(name))
	return r, nil
}

// Stop ends a recorded process: SIGTERM, a bounded wait, then SIGKILL. A record whose pid is
// gone or now belongs to another program is just removed.
func (s *Supervisor) Stop(name string) error {
	r := s.Running(name)
	defer os.Remove(s.PidFile(name))
	if r == nil {
		return nil
	}
	return s.StopRecord(name, r)
}

// StopRecord stops the process of a record: SIGTERM, the stop timeout, then SIGKILL.
func (s *Supervisor) StopRecord(name string, r *Record) error {
	s.Log.Info("stopping", "component", name, "pid", r.PID)
	_ = syscall.Kill(r.PID, syscall.SIGTERM)
	if WaitGone(r, s.StopTimeout) {
		return nil
	}
	s.Log.Warn("did not exit after SIGTERM; killing", "component", name, "pid", r.PID, "waited", s.StopTimeout)
	_ = syscall.Kill(r.PID, syscall.SIGKILL)
	if WaitGone(r, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", name, r.PID)
}

// WaitGone waits until the whole process has exited, its sockets closed: a SIGKILLed thread
// group leader turns zombie while its other threads still hold the listening sockets a moment.
func WaitGone(r *Record, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if r.Exited() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r.Exited()
}

// Exited reports whether nothing of the recorded process runs any more.
func (r *Record) Exited() bool {
	st, ok := Stat(r.PID)
	if !ok || st.Start != r.StartTime {
		return true // gone, or the pid is another process's now
	}
	if st.State != 'Z' {
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

// closeInheritedOnExec marks the descriptors this process inherited (beyond stdio) close-on-exec,
// so that the long-lived processes it starts do not hold them: a `flock <lock> devcluster up` would
// otherwise leave the lock held by etcd and the rest until `dev down`. Go opens its own
// descriptors close-on-exec already.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
