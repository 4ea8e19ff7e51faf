package hostnet

import (
	"slices"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host/hosttest"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

func TestTheGuardDropsForwardingFromTheBridgeToEveryUplink(t *testing.T) {
	f := aHost()
	if err := (Netfilter{env(f, t.TempDir())}).Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	forward, _ := f.Run("iptables", "-w", "-t", "filter", "-S", "FORWARD")
	if !strings.Contains(forward, "-A FORWARD -j "+GuardChain) {
		t.Errorf("FORWARD does not jump to %s:\n%s", GuardChain, forward)
	}
	guard, _ := f.Run("iptables", "-w", "-t", "filter", "-S", GuardChain)
	if !strings.Contains(guard, "-i "+spec.BridgeName+" -o eth0 -j DROP") {
		t.Errorf("%s does not drop %s → eth0:\n%s", GuardChain, spec.BridgeName, guard)
	}
}

// Down removes what appeared while the cluster was up, and only that.
func TestDownKeepsWhatWasThereOrIsNotOurs(t *testing.T) {
	cases := []struct {
		name    string
		before  func(f *hosttest.Fake)
		whileUp func(f *hosttest.Fake)
		step    aStep
		kept    string // a line of the fake's State that must survive Down
	}{
		{"a chain with our prefix that was there before", func(f *hosttest.Fake) { f.AddChain("iptables/nat", "KUBE-OLD") },
			func(*hosttest.Fake) {}, theStep("netfilter"), "chain iptables/nat KUBE-OLD"},
		{"a chain without our prefix that appeared", func(*hosttest.Fake) {},
			func(f *hosttest.Fake) { f.AddChain("iptables/filter", "DOCKER") }, theStep("netfilter"), "chain iptables/filter DOCKER"},
		{"an nft table that appeared holding rules", func(*hosttest.Fake) {},
			func(f *hosttest.Fake) { f.AddNftTable("ip mine", "counter") }, theStep("netfilter"), `nft ip mine ["counter"]`},
		{"a network namespace that is not a pod's", func(*hosttest.Fake) {},
			func(f *hosttest.Fake) { f.SetFile("/var/run/netns/test-host", "") }, theStep("netns"), `file /var/run/netns/test-host = ""`},
		{"a pod namespace that was there before", func(f *hosttest.Fake) { f.SetFile("/var/run/netns/cni-old", "") },
			func(*hosttest.Fake) {}, theStep("netns"), `file /var/run/netns/cni-old = ""`},
		{"a host path that was there before", func(f *hosttest.Fake) { f.Mkdir("/var/lib/kubelet") },
			func(f *hosttest.Fake) { f.Mkdir("/var/lib/kubelet/pods") }, theStep("host-paths"), "dir /var/lib/kubelet/pods"},
		{"bpffs mounted before", func(f *hosttest.Fake) { f.AddMount(BPFFSPath, "bpf") },
			func(*hosttest.Fake) {}, theStep("bpffs"), "mount /sys/fs/bpf bpf"},
		{"another network's cached CNI results", func(*hosttest.Fake) {},
			func(*hosttest.Fake) {}, theStep("cni-cache"), `file /var/lib/cni/results/other-net-abc-eth0 = "{}"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, dir := aHost(), t.TempDir()
			tc.before(f)
			if err := tc.step(f, dir).Up(t.Context()); err != nil {
				t.Fatal(err)
			}
			tc.whileUp(f)
			if err := tc.step(f, dir).Down(t.Context()); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(strings.Split(f.State(), "\n"), tc.kept) {
				t.Errorf("Down removed %q:\n%s", tc.kept, f.State())
			}
		})
	}
}

func TestSysctlsKeepBridgedFramesOutOfIptables(t *testing.T) {
	cases := []struct {
		name        string
		brNetfilter bool
	}{
		{"a kernel with br_netfilter loaded", true},
		{"a kernel without br_netfilter", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := aHost()
			if tc.brNetfilter {
				f.SetFile("/proc/sys/net/bridge/bridge-nf-call-iptables", "1\n")
			}
			if err := (Sysctls{env(f, t.TempDir())}).Up(t.Context()); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(f.Calls, "modprobe br_netfilter") {
				t.Error("Up loaded br_netfilter, want it left as it is")
			}
			if v, _ := f.ReadFile("/proc/sys/net/ipv4/ip_forward"); strings.TrimSpace(string(v)) != "1" {
				t.Errorf("ip_forward = %q after Up, want 1", v)
			}
			v, err := f.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
			switch {
			case tc.brNetfilter && strings.TrimSpace(string(v)) != "0":
				t.Errorf("bridge-nf-call-iptables = %q after Up, want 0 (Cilium's DNS proxy never sees a bridged lookup otherwise)", v)
			case !tc.brNetfilter && err == nil:
				t.Errorf("Up created bridge-nf-call-iptables (%q) on a kernel without br_netfilter", v)
			}
		})
	}
}

func TestConntrackLiberalModeThatAppearedAfterUpIsPutBackToTheKernelDefault(t *testing.T) {
	f, dir := aHost(), t.TempDir()
	if err := (Sysctls{env(f, dir)}).Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	// conntrack loaded after Up recorded the host, and kube-proxy turned liberal mode on.
	f.SetFile("/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal", "1\n")
	if err := (Sysctls{env(f, dir)}).Down(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v, _ := f.ReadFile("/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal"); strings.TrimSpace(string(v)) != "0" {
		t.Errorf("nf_conntrack_tcp_be_liberal = %q after Down, want the kernel default 0", v)
	}
}

func TestSplitIptablesRule(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`-A INPUT -j KUBE-FIREWALL`, []string{"-A", "INPUT", "-j", "KUBE-FIREWALL"}},
		{`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
			[]string{"-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"}},
		{`-A X -m comment --comment "say \"hi\"" -j CNI-1`, []string{"-A", "X", "-m", "comment", "--comment", `say "hi"`, "-j", "CNI-1"}},
	} {
		if got := SplitRule(tc.line); !slices.Equal(got, tc.want) {
			t.Errorf("SplitRule(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestOurChainsAndNftRules(t *testing.T) {
	for ch, want := range map[string]bool{"KUBE-SERVICES": true, "CNI-abc": true, "CILIUM_FORWARD": true, GuardChain: true, "DOCKER": false, "FORWARD": false} {
		if IsOurChain(ch) != want {
			t.Errorf("IsOurChain(%s) = %v, want %v", ch, !want, want)
		}
	}
	empty := "table ip raw {\n\tchain PREROUTING {\n\t\ttype filter hook prerouting priority raw; policy accept;\n\t}\n}\n"
	if HasNftRules(empty) {
		t.Error("an nft table with only chain headers counts as holding rules")
	}
	if !HasNftRules(strings.Replace(empty, "policy accept;\n", "policy accept;\n\t\tmeta mark 0x200 notrack\n", 1)) {
		t.Error("an nft table with a rule counts as empty")
	}
}

func theStep(name string) aStep {
	for _, s := range theSteps {
		if s.name == name {
			return s.step
		}
	}
	panic("no step " + name)
}
