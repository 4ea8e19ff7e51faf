package host_test

import (
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host/hosttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestUnmountAllUnmountsEverythingBelowDeepestFirst(t *testing.T) {
	f := hosttest.New()
	f.Mkdir("/state/kubelet/pods/a/volumes")
	f.AddMount("/state/kubelet/pods/a/volumes", "tmpfs")
	f.AddMount("/state/kubelet", "bind")
	f.AddMount("/stateful", "ext4") // a sibling with the same prefix stays
	if got := host.MountsUnder(f, "/state"); !slices.Equal(got, []string{"/state/kubelet/pods/a/volumes", "/state/kubelet"}) {
		t.Errorf("MountsUnder = %q, want the two mounts below /state, deepest first", got)
	}
	if err := host.UnmountAll(f, "/state"); err != nil {
		t.Fatal(err)
	}
	if left := host.MountsUnder(f, "/state"); len(left) > 0 {
		t.Errorf("mounts left under /state: %q", left)
	}
	if !host.IsMountPoint(f, "/stateful", "ext4") {
		t.Error("UnmountAll unmounted a sibling directory sharing the prefix")
	}
}

func TestRemoveTreeRemovesDirectoriesDeepestFirst(t *testing.T) {
	f := hosttest.New()
	f.Mkdir("/sys/fs/cgroup/memory/kubepods/burstable/pod1")
	f.Mkdir("/sys/fs/cgroup/memory/kubepods/besteffort")
	if err := host.RemoveTree(f, "/sys/fs/cgroup/memory/kubepods"); err != nil {
		t.Fatal(err)
	}
	if f.Exists("/sys/fs/cgroup/memory/kubepods") {
		t.Error("the tree is left")
	}
	if !f.Exists("/sys/fs/cgroup/memory") {
		t.Error("RemoveTree removed the tree's parent")
	}
}

func TestSysctlsAreReadAndWrittenOnlyWhenTheyExist(t *testing.T) {
	f := hosttest.New()
	f.SetFile("/proc/sys/net/ipv4/ip_forward", "0\n")
	if v, ok := host.ReadSysctl(f, "net/ipv4/ip_forward"); !ok || v != "0" {
		t.Errorf("ReadSysctl = %q %v, want 0", v, ok)
	}
	if err := host.WriteSysctl(f, "net/ipv4/ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	if v, _ := host.ReadSysctl(f, "net/ipv4/ip_forward"); v != "1" {
		t.Errorf("after WriteSysctl: %q, want 1", v)
	}
	if err := host.WriteSysctl(f, "net/bridge/bridge-nf-call-iptables", "1"); err == nil {
		t.Error("writing a sysctl this kernel lacks succeeded")
	}
}
