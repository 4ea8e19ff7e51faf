package devcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Host network settings the cluster changes, each recorded before the first `up` (host.json)
// and restored by `down`: the forwarding and bridge-netfilter switches kube-proxy needs, and
// what cilium-agent sets when it starts (pkg/datapath/loader, pkg/datapath/iptables).
// kernel.unprivileged_bpf_disabled is not here: the agent moves it from 2 to 1, and 1 is
// sticky (the kernel refuses any other value until a reboot).
var recordedSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/forwarding",
	"net/ipv4/conf/all/rp_filter",
	"net/ipv4/conf/all/accept_redirects",
	"net/ipv4/conf/all/send_redirects",
	"net/ipv4/conf/all/route_localnet",
	"net/ipv4/fib_multipath_use_neigh",
	"net/ipv4/ip_early_demux",
	"net/ipv6/conf/all/forwarding",
	"net/ipv6/conf/all/disable_ipv6",
	"net/core/bpf_jit_enable",
	"net/core/fb_tunnels_only_for_init_net",
	"kernel/timer_migration",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
}

func sysctlPath(name string) string { return filepath.Join("/proc/sys", name) }

func readSysctl(name string) (string, bool) {
	b, err := os.ReadFile(sysctlPath(name))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func writeSysctl(name, val string) error {
	if cur, ok := readSysctl(name); ok && cur == val {
		return nil
	}
	if err := os.WriteFile(sysctlPath(name), []byte(val+"\n"), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(name, "/", "."), val, err)
	}
	return nil
}

// currentSysctls reads the recorded settings that exist on this kernel.
func currentSysctls() map[string]string {
	out := map[string]string{}
	for _, n := range recordedSysctls {
		if v, ok := readSysctl(n); ok {
			out[n] = v
		}
	}
	return out
}

// restoreSysctls writes back every recorded value that changed. The bridge ones vanish with
// br_netfilter; a setting that no longer exists is skipped.
func restoreSysctls(rec map[string]string) error {
	var errs []error
	for _, n := range recordedSysctls {
		want, ok := rec[n]
		if !ok {
			continue
		}
		if cur, exists := readSysctl(n); exists && cur != want {
			errs = append(errs, writeSysctl(n, want))
		}
	}
	return errors.Join(errs...)
}

// enableForwarding lets bridged pod traffic pass iptables, as kube-proxy's DNAT of pod →
// ClusterIP → pod on the same bridge needs (br_netfilter), and turns IPv4 forwarding on (a
// DNATed packet is routed back onto the bridge; Cilium turns it on as well).
func enableForwarding() error {
	if _, ok := readSysctl("net/bridge/bridge-nf-call-iptables"); !ok {
		// Built into some kernels, a module in others.
		if err := runLogged("modprobe", "br_netfilter"); err != nil {
			return fmt.Errorf("bridged traffic must pass iptables for kube-proxy: %w", err)
		}
	}
	return errors.Join(
		writeSysctl("net/bridge/bridge-nf-call-iptables", "1"),
		writeSysctl("net/ipv4/ip_forward", "1"),
	)
}

// guardChain holds the one rule that keeps pods off the world: traffic forwarded from the pod
// bridge out of an interface with a default route is dropped. Pods still reach this machine's
// addresses, the pod network, and other local networks (tests add network namespaces as
// "external" hosts); nothing is masqueraded.
const guardChain = "SBXDEV-FORWARD"

func defaultRouteDevs() []string {
	out, _ := exec.Command("ip", "-o", "route", "show", "default").Output()
	var devs []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "dev" && f[i+1] != BridgeName && !slices.Contains(devs, f[i+1]) {
				devs = append(devs, f[i+1])
			}
		}
	}
	return devs
}

// ensureForwardGuard (re)writes guardChain and puts the jump to it first in FORWARD.
func ensureForwardGuard() error {
	ipt := func(args ...string) error {
		return runLogged("iptables", append([]string{"-w", "-t", "filter"}, args...)...)
	}
	if exec.Command("iptables", "-w", "-t", "filter", "-S", guardChain).Run() != nil {
		if err := ipt("-N", guardChain); err != nil {
			return err
		}
	}
	if err := ipt("-F", guardChain); err != nil {
		return err
	}
	for _, dev := range defaultRouteDevs() {
		if err := ipt("-A", guardChain, "-i", BridgeName, "-o", dev, "-j", "DROP",
			"-m", "comment", "--comment", "agent-sandbox dev: pods do not reach the world"); err != nil {
			return err
		}
	}
	jump := []string{"FORWARD", "-j", guardChain}
	if exec.Command("iptables", append([]string{"-w", "-t", "filter", "-C"}, jump...)...).Run() == nil {
		return nil
	}
	return ipt(append([]string{"-I", jump[0], "1"}, jump[1:]...)...)
}

const bpffsPath = "/sys/fs/bpf"

func bpffsMounted() bool {
	for _, mp := range mountsOfType("bpf") {
		if mp == bpffsPath {
			return true
		}
	}
	return false
}

// mountsOfType lists the mount points of a filesystem type.
func mountsOfType(fstype string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 1 && g[0] == fstype {
			out = append(out, strings.ReplaceAll(f[4], `\040`, " "))
		}
	}
	return out
}

// netnsDir is where containerd (and `ip netns`) bind-mount named network namespaces.
const netnsDir = "/run/netns"

// netnsDirMounted reports whether netnsDir is a mount point of its own.
func netnsDirMounted() bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 5 && f[4] == netnsDir {
			return true
		}
	}
	return false
}

// ensureNetnsMount makes netnsDir a shared mount point of its own before containerd puts pod
// namespaces there, as `ip netns add` does on first use. Otherwise the first `ip netns add`
// run while pods exist (the e2e network test's hosts, an operator's debugging) bind-mounts the
// directory over itself, hides the pods' namespace mounts under it, and containerd can never
// remove them again (unlink: device or resource busy). It reports whether it mounted.
func ensureNetnsMount() (bool, error) {
	if netnsDirMounted() {
		return false, nil
	}
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return false, err
	}
	if err := syscall.Mount(netnsDir, netnsDir, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return false, fmt.Errorf("bind-mounting %s: %w", netnsDir, err)
	}
	if err := syscall.Mount("", netnsDir, "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
		return true, fmt.Errorf("making %s shared: %w", netnsDir, err)
	}
	return true, nil
}

// ensureBPFFS mounts the BPF filesystem Cilium pins its maps in, and reports whether it did.
func ensureBPFFS() (bool, error) {
	if bpffsMounted() {
		return false, nil
	}
	if err := syscall.Mount("bpffs", bpffsPath, "bpf", 0, ""); err != nil {
		return false, fmt.Errorf("mounting bpffs at %s: %w", bpffsPath, err)
	}
	return true, nil
}

// nftTables lists "family name" of every nft table (nil when nft is not installed).
func nftTables() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	tables := []string{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "table" {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	return tables
}

// removeEmptyNftTables deletes the nft tables that were not there before and hold no rules any
// more: iptables-nft keeps a table (Cilium's `ip raw`) after its last chain is gone.
func removeEmptyNftTables(before []string) error {
	if before == nil {
		return nil // not recorded: nothing is known to be ours
	}
	var errs []error
	for _, t := range nftTables() {
		if slices.Contains(before, t) {
			continue
		}
		fam, name, _ := strings.Cut(t, " ")
		out, err := exec.Command("nft", "list", "table", fam, name).Output()
		if err != nil || hasNftRules(string(out)) {
			continue
		}
		errs = append(errs, runLogged("nft", "delete", "table", fam, name))
	}
	return errors.Join(errs...)
}

// hasNftRules reports whether `nft list table` output holds a rule, not just chain headers.
func hasNftRules(listing string) bool {
	for _, l := range strings.Split(listing, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || t == "}" || strings.HasPrefix(t, "table ") || strings.HasPrefix(t, "chain ") ||
			strings.HasPrefix(t, "type ") || strings.HasPrefix(t, "policy ") {
			continue
		}
		return true
	}
	return false
}
