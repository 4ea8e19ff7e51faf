package hostnet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host/hosttest"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/step"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// aHost is a fake machine as the cluster finds it: forwarding off, bridge netfilter not
// loaded, iptables with a chain of someone else, an nft table, a netns of someone else.
func aHost() *hosttest.Fake {
	f := hosttest.New()
	for _, n := range RecordedSysctls {
		if !strings.HasPrefix(n, "net/bridge/") {
			f.SetFile("/proc/sys/"+n, "0\n")
		}
	}
	f.AddChain("iptables/filter", "DOCKER-USER", "-j\x00RETURN")
	f.AddNftTable("inet filter", "tcp dport 22 accept")
	f.SetFile("/var/run/netns/theirs", "")
	f.Mkdir("/var/lib/cni/results")
	f.SetFile("/var/lib/cni/results/other-net-abc-eth0", "{}")
	return f
}

// aStep builds one step on a host with records in dir; a second call with the same dir is the
// step as a later process (`dev down` after `dev up`) sees it.
type aStep func(f *hosttest.Fake, dir string) step.Step

func env(f *hosttest.Fake, dir string) Env { return Env{Host: f, Store: step.Store{Dir: dir}} }

// theSteps are every step of this package, each with what the cluster's components do to the
// host while it is up (which Down must undo as well).
var theSteps = []struct {
	name      string
	step      aStep
	whileUp   func(f *hosttest.Fake)
	failUpOn  string // a command Up runs after it recorded the host
	stateDirs bool
}{
	{name: "host-paths", step: func(f *hosttest.Fake, d string) step.Step { return Paths{env(f, d)} },
		whileUp: func(f *hosttest.Fake) {
			f.Mkdir("/sys/fs/cgroup/memory/kubepods/burstable/pod1")
			f.Mkdir("/run/containerd/io.containerd.runtime.v2.task")
			f.Mkdir("/tmp/hostpath_pv/pvc-1")
		}},
	{name: "netfilter", step: func(f *hosttest.Fake, d string) step.Step { return Netfilter{env(f, d)} },
		whileUp: func(f *hosttest.Fake) {
			f.AddChain("iptables/nat", "KUBE-SERVICES")
			f.AddChain("iptables/nat", "PREROUTING", "-m\x00comment\x00--comment\x00kubernetes service portals\x00-j\x00KUBE-SERVICES")
			f.AddChain("iptables/raw", "CILIUM_PRE_raw")
			f.AddNftTable("ip raw")
			// The anti-spoofing plugin's table, with a pod's chain that no DEL removed.
			f.AddNftTable(AntispoofTable, "iifname vmap @ports", "ether saddr != 02:00:00:00:00:01 drop")
		},
		failUpOn: "iptables -w -t filter -I FORWARD"},
	{name: "sysctls", step: func(f *hosttest.Fake, d string) step.Step { return Sysctls{env(f, d)} },
		whileUp: func(f *hosttest.Fake) {
			f.SetFile("/proc/sys/net/ipv4/conf/all/accept_redirects", "1\n") // as cilium-agent does
		}},
	{name: "netns", step: func(f *hosttest.Fake, d string) step.Step { return Netns{env(f, d)} },
		whileUp:  func(f *hosttest.Fake) { f.SetFile("/var/run/netns/cni-1234", "") },
		failUpOn: "mount " + NetnsDir},
	{name: "bridge", step: func(f *hosttest.Fake, d string) step.Step { return Bridge{env(f, d)} },
		whileUp: func(f *hosttest.Fake) {}, failUpOn: "ip addr add"},
	{name: "volume-root", step: func(f *hosttest.Fake, d string) step.Step { return VolumeRoot{env(f, d)} },
		whileUp: func(f *hosttest.Fake) {}, failUpOn: "mount " + VolumeRootPath},
	{name: "bpffs", step: func(f *hosttest.Fake, d string) step.Step { return BPFFS{env(f, d)} },
		whileUp: func(f *hosttest.Fake) {}, failUpOn: "mount " + BPFFSPath},
	{name: "cni-cache", step: func(f *hosttest.Fake, d string) step.Step {
		return CNICache{Env: env(f, d), Network: spec.CNINetwork}
	}, whileUp: func(f *hosttest.Fake) { f.SetFile("/var/lib/cni/results/agent-sandbox-dev-abc-eth0", "{}") }},
	{name: "state-dir", step: func(f *hosttest.Fake, d string) step.Step {
		return StateDir{Env: env(f, d), Dir: filepath.Join(d, "state")}
	}, whileUp: func(f *hosttest.Fake) {}, stateDirs: true},
}

func TestUpThenDownLeavesTheHostAsItWas(t *testing.T) {
	for _, tc := range theSteps {
		t.Run(tc.name, func(t *testing.T) {
			f, dir := aHost(), t.TempDir()
			before := f.State()
			if err := tc.step(f, dir).Up(t.Context()); err != nil {
				t.Fatalf("Up: %v", err)
			}
			tc.whileUp(f)
			// Down runs in another process: only the records on disk connect them.
			if err := tc.step(f, dir).Down(t.Context()); err != nil {
				t.Fatalf("Down: %v", err)
			}
			if after := f.State(); after != before {
				t.Errorf("the host after Up and Down differs from before:\n%s", diff(before, after))
			}
			if !(step.Store{Dir: dir}).Empty() {
				t.Error("Down restored everything but kept its record")
			}
		})
	}
}

func TestUpTwiceThenDownLeavesTheHostAsItWas(t *testing.T) {
	for _, tc := range theSteps {
		t.Run(tc.name, func(t *testing.T) {
			f, dir := aHost(), t.TempDir()
			before := f.State()
			for range 2 {
				if err := tc.step(f, dir).Up(t.Context()); err != nil {
					t.Fatalf("Up: %v", err)
				}
				tc.whileUp(f)
			}
			if err := tc.step(f, dir).Down(t.Context()); err != nil {
				t.Fatalf("Down: %v", err)
			}
			if after := f.State(); after != before {
				t.Errorf("a second Up recorded the first one's changes as the host's:\n%s", diff(before, after))
			}
		})
	}
}

func TestDownAfterAFailedUpRestoresWhatWasRecorded(t *testing.T) {
	for _, tc := range theSteps {
		if tc.failUpOn == "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			f, dir := aHost(), t.TempDir()
			before := f.State()
			f.FailOn[tc.failUpOn] = errors.New("injected")
			if err := tc.step(f, dir).Up(t.Context()); err == nil {
				t.Fatalf("Up succeeded though %q failed", tc.failUpOn)
			}
			delete(f.FailOn, tc.failUpOn)
			if err := tc.step(f, dir).Down(t.Context()); err != nil {
				t.Fatalf("Down: %v", err)
			}
			if after := f.State(); after != before {
				t.Errorf("Down after a failed Up left changes:\n%s", diff(before, after))
			}
		})
	}
}

func TestDownWithNothingRecordedChangesNothing(t *testing.T) {
	for _, tc := range theSteps {
		t.Run(tc.name, func(t *testing.T) {
			f, dir := aHost(), t.TempDir()
			// Things that look like the cluster's, but no record says they are.
			tc.whileUp(f)
			f.AddLink(spec.BridgeName, "bridge")
			f.AddMount(BPFFSPath, "bpf")
			if tc.stateDirs {
				if err := os.MkdirAll(filepath.Join(dir, "state", "etcd"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			before := f.State()
			if err := tc.step(f, dir).Down(t.Context()); err != nil {
				t.Fatalf("Down: %v", err)
			}
			if after := f.State(); after != before {
				t.Errorf("Down without a record changed the host:\n%s", diff(before, after))
			}
			if tc.stateDirs && !exists(filepath.Join(dir, "state", "etcd")) {
				t.Error("Down without a record removed state")
			}
		})
	}
}

func TestDownThatFailsKeepsItsRecordForTheNextDown(t *testing.T) {
	f, dir := aHost(), t.TempDir()
	before := f.State()
	s := func() step.Step { return Bridge{env(f, dir)} }
	if err := s().Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.FailOn["ip link delete"] = errors.New("injected")
	if err := s().Down(t.Context()); err == nil {
		t.Fatal("Down succeeded though deleting the bridge failed")
	}
	delete(f.FailOn, "ip link delete")
	if err := s().Down(t.Context()); err != nil {
		t.Fatalf("second Down: %v", err)
	}
	if after := f.State(); after != before {
		t.Errorf("the second Down did not finish the job:\n%s", diff(before, after))
	}
}

func diff(before, after string) string {
	b, a := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		b[l] = true
	}
	for _, l := range strings.Split(after, "\n") {
		a[l] = true
	}
	var out []string
	for l := range b {
		if !a[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range a {
		if !b[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
