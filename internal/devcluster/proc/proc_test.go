package proc

import (
	"os"
	"os/exec"
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
