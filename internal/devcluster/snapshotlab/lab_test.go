package snapshotlab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/hibernate"
)

// The lab's tests need root, containerd, ctr, ip and the cached gVisor build, and run only when
// SNAPSHOT_LAB=1 (hack/snapshot-lab.sh sets it): they start a containerd, and the cost test
// takes minutes.
func startLab(t *testing.T) *Lab {
	t.Helper()
	if os.Getenv("SNAPSHOT_LAB") != "1" {
		t.Skip("set SNAPSHOT_LAB=1 (or run hack/snapshot-lab.sh) to run the snapshot lab")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs containerd and gVisor sandboxes")
	}
	for _, bin := range []string{"/usr/bin/containerd", "ctr", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s", bin)
		}
	}
	out, err := exec.Command("../../../hack/build-gvisor.sh", "--print-dir").Output()
	if err != nil {
		t.Fatalf("hack/build-gvisor.sh --print-dir: %v", err)
	}
	gvisorDir := strings.TrimSpace(string(out))
	for _, bin := range []string{"runsc", "containerd-shim-runsc-v1"} {
		if _, err := os.Stat(filepath.Join(gvisorDir, bin)); err != nil {
			t.Skipf("no %s in %s: run hack/build-gvisor.sh", bin, gvisorDir)
		}
	}
	dir, err := os.MkdirTemp("", "snaplab-")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := Start(ctx, dir, gvisorDir)
	if l != nil {
		l.Progress = func(f string, a ...any) { t.Logf(f, a...) }
		t.Cleanup(func() {
			if err := l.Close(); err != nil {
				t.Errorf("closing the lab: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "workload")
	build := exec.Command("go", "build", "-o", bin, "./workload")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the workload: %v: %s", err, out)
	}
	archive := filepath.Join(dir, "image.tar")
	if _, err := WorkloadImage(bin).WriteArchiveFile(archive); err != nil {
		t.Fatal(err)
	}
	if err := l.Import(ctx, archive); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestCheckpointRestoreKeepsTheSandboxsState checkpoints a running workload through the shim
// and restores it into a new container in another network namespace: its processes, memory,
// files and sockets must be those it had; its address must be the new namespace's.
func TestCheckpointRestoreKeepsTheSandboxsState(t *testing.T) {
	l := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := l.Cycle(ctx, "keep", 64, hibernate.CheckpointOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before the checkpoint: %+v", s.Before)
	t.Logf("after the restore:     %+v", s.After)
	b, a := s.Before, s.After
	for _, c := range []struct {
		what     string
		ok       bool
		got, was any
	}{
		{"the workload's pid", a.PID == b.PID, a.PID, b.PID},
		{"its child, alive", a.ChildPID == b.ChildPID && a.ChildAlive, fmt.Sprint(a.ChildPID, a.ChildAlive), b.ChildPID},
		{"the counter, carried on", a.Counter >= b.Counter && a.Counter < b.Counter+100_000, a.Counter, b.Counter},
		{"the token in memory", a.Token == "token-keep-a", a.Token, b.Token},
		{"the buffer", a.MemoryIntact && a.MemoryCRC == b.MemoryCRC, a.MemoryCRC, b.MemoryCRC},
		{"the rootfs file written through the fd opened at start", lineCount(a.OpenFile) == lineCount(b.OpenFile)+1, a.OpenFile, b.OpenFile},
		{"the bind-mounted file written through its fd", lineCount(a.BindOpenFile) == lineCount(b.BindOpenFile)+1, a.BindOpenFile, b.BindOpenFile},
		{"the token on the rootfs overlay", a.RootfsFile == "token-keep-a", a.RootfsFile, b.RootfsFile},
		{"the token on the bind mount", a.BindFile == "token-keep-a", a.BindFile, b.BindFile},
		{"the TCP connection held since start", strings.HasPrefix(a.HeldConn, "pong "), a.HeldConn, b.HeldConn},
		{"the new namespace's address", strings.Contains(a.Addrs, "10.231.0.2/24") && !strings.Contains(a.Addrs, "10.231.0.1/"), a.Addrs, b.Addrs},
	} {
		if !c.ok {
			t.Errorf("after the restore, %s: got %v, before the checkpoint %v", c.what, c.got, c.was)
		}
	}
}

// lineCount reads "N lines, last …" as the workload reports a file it appends to.
func lineCount(s string) int {
	var n int
	if _, err := fmt.Sscanf(s, "%d lines", &n); err != nil {
		return -1
	}
	return n
}
