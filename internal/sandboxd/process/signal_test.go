package process_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// backgroundChild starts, under the shell that Run starts, a child that outlives its own
// command line, prints the child's pid and waits for it.
const backgroundChild = `sleep 1000 & echo $!; wait`

// A signal sent to a command reaches its whole process group: the shell and the child it
// started both die of it.
func TestSignalReachesTheWholeProcessGroup(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			r := newRunner(t)
			out := newOutput()
			done, started := run(context.Background(), r, buildSpec(t, r, &wire.ExecRequest{Command: backgroundChild}), false, out)
			c := receive(t, started, "the command's start")
			child := out.waitForNumber(t, process.Stdout, "")
			if !alive(t, child) || !contains(groupMembers(t, c.PID()), child) {
				t.Fatalf("the shell's child %d is not a running member of the command's group %d: %v", child, c.PID(), groupMembers(t, c.PID()))
			}
			if err := c.Signal(sig); err != nil {
				t.Fatalf("Signal(%s): %v", sig, err)
			}
			res := receive(t, done, "the command's end after "+sig.String())
			if res.Signal != int(sig) || res.ExitCode != 128+int(sig) || res.TimedOut {
				t.Errorf("result %+v, want the shell killed by %s (signal %d, exit code %d), not timed out", res, sig, sig, 128+int(sig))
			}
			waitDead(t, "the shell's child after "+sig.String()+" to the group", child)
		})
	}
}

// An interrupt ends a command. (A shell's background child is left out: a shell without job
// control starts it with SIGINT ignored, as POSIX asks.)
func TestInterruptEndsACommand(t *testing.T) {
	r := newRunner(t)
	done, started := run(context.Background(), r, buildSpec(t, r, &wire.ExecRequest{Argv: []string{"sleep", "1000"}}), false, newOutput())
	c := receive(t, started, "the command's start")
	if err := c.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("Signal(SIGINT): %v", err)
	}
	res := receive(t, done, "the command's end after an interrupt")
	if res.Signal != int(syscall.SIGINT) {
		t.Errorf("result %+v, want the command killed by SIGINT", res)
	}
}

// A signal to a command that has exited is refused rather than sent to whatever now has its
// process group id.
func TestSignalAfterExitIsRefused(t *testing.T) {
	r := newRunner(t)
	done, started := run(context.Background(), r, buildSpec(t, r, &wire.ExecRequest{Argv: []string{"true"}}), false, newOutput())
	c := receive(t, started, "the command's start")
	receive(t, done, "the command's end")
	if err := c.Signal(syscall.SIGTERM); err == nil {
		t.Fatal("Signal after the command exited returned no error")
	}
	if got := c.ExitCode(); got != 0 {
		t.Fatalf("ExitCode() = %d, want 0", got)
	}
}

// A command over its timeout is killed with its whole group, and the result says it timed out
// (exit code 124, as timeout(1) has it). The shell ignores SIGTERM, so the group needs the
// SIGKILL that follows the grace.
func TestTimeoutKillsTheGroup(t *testing.T) {
	r := newRunner(t)
	out := newOutput()
	req := &wire.ExecRequest{Command: `trap '' TERM; ` + backgroundChild, TimeoutSeconds: 3}
	done, started := run(context.Background(), r, buildSpec(t, r, req), false, out)
	c := receive(t, started, "the command's start")
	child := out.waitForNumber(t, process.Stdout, "") // printed well within the timeout
	res := receive(t, done, "the command's end at its timeout")
	if !res.TimedOut || res.ExitCode != 124 || res.Signal == 0 {
		t.Errorf("result %+v, want timed out, exit code 124, killed by a signal", res)
	}
	waitDead(t, "the shell's child after the timeout", child)
	if m := groupMembers(t, c.PID()); len(m) != 0 {
		t.Errorf("processes %v of the group outlived the timeout", m)
	}
}

// A command that stopped itself (SIGSTOP) is continued on its timeout, so that it can act on the
// SIGTERM it was sent, and ends.
func TestTimeoutEndsAStoppedCommand(t *testing.T) {
	r := newRunner(t)
	done, _ := run(context.Background(), r, buildSpec(t, r, &wire.ExecRequest{Command: `kill -STOP $$`, TimeoutSeconds: 1}), false, newOutput())
	res := receive(t, done, "the end of a stopped command at its timeout")
	if !res.TimedOut || res.ExitCode != 124 || res.Signal != int(syscall.SIGTERM) {
		t.Fatalf("result %+v, want timed out with exit code 124, ended by SIGTERM (not the SIGKILL after the grace)", res)
	}
}

// A positive timeout too short to count in nanoseconds still times the command out, rather than
// leaving it without any limit.
func TestATimeoutUnderANanosecondStillTimesOut(t *testing.T) {
	r := newRunner(t)
	done, _ := run(context.Background(), r, buildSpec(t, r, &wire.ExecRequest{Argv: []string{"sleep", "1000"}, TimeoutSeconds: 1e-10}), false, newOutput())
	if res := receive(t, done, "the end of a command with a 0.1 ns timeout"); !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("result %+v, want timed out with exit code 124", res)
	}
}

// A cancelled context (the client went away) kills the command and its group; that is not a
// timeout.
func TestCancelKillsTheGroup(t *testing.T) {
	r := newRunner(t)
	out := newOutput()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, started := run(ctx, r, buildSpec(t, r, &wire.ExecRequest{Command: backgroundChild}), false, out)
	receive(t, started, "the command's start")
	child := out.waitForNumber(t, process.Stdout, "")
	cancel()
	res := receive(t, done, "the command's end after the cancel")
	if res.TimedOut || res.Signal != int(syscall.SIGTERM) || res.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("result %+v, want the shell ended by SIGTERM (exit code %d), not a timeout", res, 128+int(syscall.SIGTERM))
	}
	waitDead(t, "the shell's child after the cancel", child)
}

// After commands of every ending — exit codes, signals, timeouts, failures to start, kills of
// commands that were only started — no child of the daemon is left a zombie.
func TestNoZombiesAfterRuns(t *testing.T) {
	r := newRunner(t)
	for _, req := range []*wire.ExecRequest{
		{Argv: []string{"true"}},
		{Command: "exit 3"},
		{Command: "kill -KILL $$"},
		{Command: backgroundChild, TimeoutSeconds: 0.2},
		{Command: "exec sleep 1000", TimeoutSeconds: 0.2},
		{Argv: []string{"no-such-command-anywhere"}},
		{Command: "sleep 0.1 & exit 0"},
		{Command: "echo hi", TTY: true},
	} {
		r.Collect(context.Background(), buildSpec(t, r, req), "test")
	}
	c, err := r.Start(buildSpec(t, r, &wire.ExecRequest{Argv: []string{"sleep", "1000"}}), false)
	if err != nil {
		t.Fatal(err)
	}
	c.Kill()
	c.PumpOutput(func(int, []byte) {})
	receive(t, c.Exited(), "the killed command's exit")
	if z := zombieChildren(t); len(z) != 0 {
		t.Fatalf("zombie children left: %v", z)
	}
}

// Shutdown: KillAll ends every foreground command, Wait returns once they are gone, and after
// Stop a new command is killed as soon as it starts.
func TestShutdownKillsForegroundCommands(t *testing.T) {
	r := newRunner(t)
	out := newOutput()
	done, started := run(context.Background(), r, buildSpec(t, r, &wire.ExecRequest{Argv: []string{"sleep", "1000"}}), false, out)
	c := receive(t, started, "the command's start")
	r.Stop()
	r.KillAll()
	if res := receive(t, done, "the command's end after KillAll"); res.Signal != int(syscall.SIGTERM) {
		t.Errorf("result %+v, want the command ended by SIGTERM", res)
	}
	waited := make(chan struct{})
	go func() { r.Wait(); close(waited) }()
	receive(t, waited, "Wait's return")
	if alive(t, c.PID()) {
		t.Errorf("process %d still runs after shutdown", c.PID())
	}

	res := r.Run(context.Background(), buildSpec(t, r, &wire.ExecRequest{Argv: []string{"sleep", "1000"}}), false, out.emit, nil)
	if res.Signal != int(syscall.SIGKILL) {
		t.Errorf("a command started after Stop: result %+v, want it killed by SIGKILL at once", res)
	}
}

func contains(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// ignoredHangupEnv marks the run of this test binary that TestSignalsIgnoredBySandboxdAreNotPassedOn
// starts with SIGHUP and SIGINT ignored.
const ignoredHangupEnv = "PROCESS_TEST_STARTED_WITH_SIGHUP_IGNORED"

// A command's hang-up and interrupt kill it even when sandboxd itself was started with them
// ignored (nohup): the ignored disposition is not passed on to the commands it runs.
func TestSignalsIgnoredBySandboxdAreNotPassedOn(t *testing.T) {
	if os.Getenv(ignoredHangupEnv) != "" {
		t.Skip("already the run with SIGHUP ignored")
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A shell can ignore a signal and exec: the ignored disposition survives the exec.
	cmd := exec.Command("sh", "-c", `trap '' HUP INT; exec "$0" -test.run '^(TestSignalReachesTheWholeProcessGroup|TestInterruptEndsACommand)$/^hangup$' -test.count 1 -test.v`, bin)
	cmd.Env = append(os.Environ(), ignoredHangupEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("with SIGHUP and SIGINT ignored at start, a command did not die of them: %v\n%s", err, out)
	}
	for _, name := range []string{"TestSignalReachesTheWholeProcessGroup/hangup", "TestInterruptEndsACommand"} {
		if !strings.Contains(string(out), "--- PASS: "+name) {
			t.Fatalf("the run with SIGHUP and SIGINT ignored did not pass %s:\n%s", name, out)
		}
	}
}
