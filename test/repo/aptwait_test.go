package repo

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// aptRoot is a private apt and dpkg state (lists, dpkg status, cache, no sources), so the test
// takes and holds apt's locks without touching the machine's.
type aptRoot struct{ dir string }

func newAptRoot(t *testing.T) aptRoot {
	t.Helper()
	r := aptRoot{t.TempDir()}
	for _, d := range []string{"lists/partial", "dpkg", "sources.list.d", "cache"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"dpkg/status", "sources.list"} {
		if err := os.WriteFile(filepath.Join(r.dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r aptRoot) options() []string {
	return []string{
		"-qq",
		"-o", "Dir::State::Lists=" + filepath.Join(r.dir, "lists"),
		"-o", "Dir::State::status=" + filepath.Join(r.dir, "dpkg/status"),
		"-o", "Dir::Etc::sourcelist=" + filepath.Join(r.dir, "sources.list"),
		"-o", "Dir::Etc::sourceparts=" + filepath.Join(r.dir, "sources.list.d"),
		"-o", "Dir::Cache=" + filepath.Join(r.dir, "cache"),
	}
}

// holdLock takes the fcntl write lock apt and dpkg use on path, as another package manager
// would; the returned function releases it.
func holdLock(t *testing.T, path string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		t.Fatalf("locking %s: %v", path, err)
	}
	return func() { _ = f.Close() } // closing drops the process's fcntl locks on the file
}

// A fresh VM's unattended upgrades hold apt's locks at boot: the install step waits for them,
// saying once whom it waits for, instead of failing, and gives up only after its bound.
func TestAptGetWaitsForAnotherPackageManagersLock(t *testing.T) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("no apt-get on this machine")
	}
	cases := []struct {
		name         string
		command      string // apt-get's subcommand
		lock         string // under the private apt root
		releaseAfter bool   // release once the script announces its wait; else hold to the end
		waitSeconds  string
		wantExitZero bool
		wantStderr   []string
	}{
		{"update while the lists' lock is held, released during the wait", "update", "lists/lock", true, "600", true,
			[]string{"waiting up to 600s for another package manager: Could not get lock", "lists/lock"}},
		{"install-time dpkg lock held, released during the wait", "check", "dpkg/lock-frontend", true, "600", true,
			[]string{"waiting up to 600s for another package manager:", "lock-frontend"}},
		{"update while the lists' lock stays held past the bound", "update", "lists/lock", false, "3", false,
			[]string{"waiting up to 3s", "gave up after 3s", fmt.Sprintf("held by process %d", os.Getpid())}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := newAptRoot(t)
			release := holdLock(t, filepath.Join(root.dir, tc.lock))
			defer release()
			cmd := exec.Command("../../hack/apt-get-waiting.sh", append(root.options(), tc.command)...)
			cmd.Env = append(os.Environ(), "APT_LOCK_WAIT_SECONDS="+tc.waitSeconds)
			stderrPipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			lines := bufio.NewScanner(stderrPipe)
			for lines.Scan() {
				stderr.WriteString(lines.Text() + "\n")
				if tc.releaseAfter && strings.Contains(lines.Text(), "waiting up to") {
					release()
				}
			}
			err = cmd.Wait()
			if (err == nil) != tc.wantExitZero {
				t.Errorf("exit: %v, want success %v; stderr:\n%s", err, tc.wantExitZero, stderr.String())
			}
			for _, want := range tc.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr:\n%s\nwant it to say %q", stderr.String(), want)
				}
			}
			if n := strings.Count(stderr.String(), "waiting up to"); n != 1 {
				t.Errorf("stderr announces the wait %d times, want once:\n%s", n, stderr.String())
			}
		})
	}
}
