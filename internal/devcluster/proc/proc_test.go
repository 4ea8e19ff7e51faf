package proc

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestProcessRecordIdentity(t *testing.T) {
	st, ok := Stat(os.Getpid())
	if !ok {
		t.Fatal("cannot read our own /proc stat")
	}
	self := &Record{PID: os.Getpid(), StartTime: st.Start}
	if !self.Alive() {
		t.Fatal("our own process is not alive")
	}
	// The same pid with another start time is a different process (pid reuse).
	if (&Record{PID: os.Getpid(), StartTime: st.Start + 1}).Alive() {
		t.Fatal("a reused pid counted as our process")
	}
}

// A process has exited only once nothing of it is left: not while it (or a thread) runs, and
// a zombie whose threads are all gone has.
func TestProcessExitedOnlyWhenNothingOfItRuns(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st, _ := Stat(cmd.Process.Pid)
	r := &Record{PID: cmd.Process.Pid, StartTime: st.Start}
	if r.Exited() {
		t.Fatal("a running process counted as exited")
	}
	if self, _ := Stat(os.Getpid()); (&Record{PID: os.Getpid(), StartTime: self.Start}).Exited() {
		t.Fatal("this test process (many threads) counted as exited")
	}
	_ = cmd.Process.Kill()
	if !WaitGone(r, 5*time.Second) {
		t.Fatal("a killed process, a zombie until reaped, did not count as exited")
	}
	_ = cmd.Wait()
	if !r.Exited() {
		t.Fatal("a reaped process did not count as exited")
	}
}

// A process started under `flock <lock> devcluster up` must not keep the lock: the descriptors
// sbx inherited stay out of the processes it starts.
func TestStartedProcessesDoNotInheritOurDescriptors(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "lock")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// As an inherited descriptor would be: without close-on-exec.
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_SETFD, 0); errno != 0 {
		t.Fatal(errno)
	}
	s := &Supervisor{Dir: t.TempDir(), Log: slog.New(slog.DiscardHandler), Out: io.Discard, StopTimeout: 5 * time.Second}
	r, err := s.Start("sleeper", "/bin/sleep", []string{"300"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop("sleeper") }()
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", r.PID))
	for _, fd := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", r.PID, fd.Name())); target == f.Name() {
			t.Errorf("the started process holds our descriptor %s (fd %s)", target, fd.Name())
		}
	}
}
