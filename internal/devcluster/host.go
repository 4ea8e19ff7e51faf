package devcluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// hostState is what the machine looked like before the first Up, so that Down restores exactly
// that and removes only what the cluster added.
type hostState struct {
	IPForward string `json:"ipForward"`
	// Paths that did not exist before and that Down removes again.
	CreatedPaths []string `json:"createdPaths"`
	// Netns names and iptables chains that existed before: never touched.
	Netns  []string            `json:"netns"`
	Chains map[string][]string `json:"chains"` // "iptables/nat" -> chains
	// Sysctls as they were (see recordedSysctls); nft tables that existed (iptables-nft leaves
	// empty ones behind); whether Up mounted bpffs for Cilium (then Down unmounts it).
	Sysctls      map[string]string `json:"sysctls"`
	NftTables    []string          `json:"nftTables"`
	BPFFSMounted bool              `json:"bpffsMounted,omitempty"`
	// Whether Up made /run/netns a mount point of its own (then Down unmounts it).
	NetnsMounted bool `json:"netnsMounted,omitempty"`
}

const ipForwardPath = "/proc/sys/net/ipv4/ip_forward"

// Host paths the cluster's components create outside the state dir.
var hostPaths = []string{
	"/var/run/netns",   // pod network namespaces (containerd)
	"/var/lib/cni",     // libcni's result cache
	"/run/containerd",  // shim sockets (containerd 1.6 puts them there whatever its state dir)
	"/tmp/hostpath_pv", // kube-controller-manager's hostpath provisioner (fixed path)
	"/var/lib/kubelet", // kubelet keeps a few files at the default root regardless
	"/var/log/pods",    // in case a component ignores our log dirs
	"/var/log/containers",
}

func cgroupRoots() []string {
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out
}

// cgroupDirs are the cgroups kubelet (kubepods) and containerd (k8s.io) create in every hierarchy.
func cgroupDirs() []string {
	var out []string
	for _, r := range cgroupRoots() {
		out = append(out, filepath.Join(r, "kubepods"), filepath.Join(r, "k8s.io"))
	}
	return out
}

func (c *Config) hostStatePath() string { return c.path("host.json") }

// recordHost saves the pre-cluster state once; later Ups keep the first record (completing
// one written before sysctls and nft tables were recorded).
func (c *Config) recordHost() error {
	if fileExists(c.hostStatePath()) {
		return c.updateHost(func(hs *hostState) {
			if hs.Sysctls == nil {
				hs.Sysctls = currentSysctls()
			}
			if hs.NftTables == nil {
				hs.NftTables = nftTables()
			}
		})
	}
	fwd, err := os.ReadFile(ipForwardPath)
	if err != nil {
		return err
	}
	hs := hostState{IPForward: strings.TrimSpace(string(fwd)), Chains: map[string][]string{}}
	for _, p := range append(append([]string{}, hostPaths...), cgroupDirs()...) {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			hs.CreatedPaths = append(hs.CreatedPaths, p)
		}
	}
	hs.Netns = listNetns()
	hs.Sysctls, hs.NftTables = currentSysctls(), nftTables()
	for _, key := range iptablesTables() {
		hs.Chains[key] = chainsOf(key)
	}
	data, _ := json.MarshalIndent(hs, "", "  ")
	return os.WriteFile(c.hostStatePath(), data, 0o644)
}

// updateHost changes the host record in place.
func (c *Config) updateHost(change func(*hostState)) error {
	hs, err := c.loadHost()
	if err != nil {
		return err
	}
	change(hs)
	data, _ := json.MarshalIndent(hs, "", "  ")
	return os.WriteFile(c.hostStatePath(), data, 0o644)
}

func (c *Config) loadHost() (*hostState, error) {
	data, err := os.ReadFile(c.hostStatePath())
	if err != nil {
		return nil, err
	}
	var hs hostState
	return &hs, json.Unmarshal(data, &hs)
}

func listNetns() []string {
	entries, _ := os.ReadDir("/var/run/netns")
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func iptablesTables() []string {
	var out []string
	// kubelet may use either backend; chains are only ever removed if they were not there before.
	for _, bin := range []string{"iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy"} {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		for _, t := range []string{"filter", "nat", "mangle", "raw"} {
			out = append(out, bin+"/"+t)
		}
	}
	return out
}

func chainsOf(key string) []string {
	bin, table, _ := strings.Cut(key, "/")
	out, err := exec.Command(bin, "-w", "-t", table, "-S").Output()
	if err != nil {
		return nil
	}
	var chains []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "-N" {
			chains = append(chains, f[1])
		}
	}
	return chains
}

// Chain prefixes of the cluster: kube-proxy and the kubelet (KUBE-), the CNI bridge plugin
// (CNI-), Cilium (CILIUM_) and our forward guard (SBXDEV-).
var chainPrefixes = []string{"KUBE-", "CNI-", "CILIUM_", "SBXDEV-"}

func isOurChain(ch string) bool {
	for _, p := range chainPrefixes {
		if strings.HasPrefix(ch, p) {
			return true
		}
	}
	return false
}

// ourChains lists the chains of a table with our prefixes that were not there before the cluster.
func ourChains(key string, before []string) []string {
	old := map[string]bool{}
	for _, c := range before {
		old[c] = true
	}
	var out []string
	for _, ch := range chainsOf(key) {
		if !old[ch] && isOurChain(ch) {
			out = append(out, ch)
		}
	}
	return out
}

// removeChains deletes the rules that jump to our chains, then flushes and deletes the chains.
func removeChains(key string, chains []string) error {
	if len(chains) == 0 {
		return nil
	}
	bin, table, _ := strings.Cut(key, "/")
	ours := map[string]bool{}
	for _, ch := range chains {
		ours[ch] = true
	}
	out, err := exec.Command(bin, "-w", "-t", table, "-S").Output()
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range strings.Split(string(out), "\n") {
		f := splitRule(l)
		if len(f) < 2 || f[0] != "-A" || ours[f[1]] {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if (f[i] == "-j" || f[i] == "-g") && ours[f[i+1]] {
				// -S prints rules in the syntax -D accepts.
				args := append([]string{"-w", "-t", table, "-D"}, f[1:]...)
				if err := runLogged(bin, args...); err != nil {
					errs = append(errs, err)
				}
				break
			}
		}
	}
	for _, op := range []string{"-F", "-X"} {
		for _, ch := range chains {
			if err := runLogged(bin, "-w", "-t", table, op, ch); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// splitRule splits a line of `iptables -S` into arguments: fields separated by spaces, where a
// double-quoted field (a comment) may hold spaces and backslash-escaped quotes.
func splitRule(line string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\\' && inQuote && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case ch == '"':
			inQuote, have = !inQuote, true
		case ch == ' ' && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// mountsUnder lists mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unmountAll(dir string) error {
	var errs []error
	// Repeat: a path can be mounted over more than once.
	for round := 0; round < 5; round++ {
		mps := mountsUnder(dir)
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			if err := syscall.Unmount(mp, 0); err != nil {
				if err2 := syscall.Unmount(mp, syscall.MNT_DETACH); err2 != nil && round == 4 {
					errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err2))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// removeCgroup removes a cgroup directory tree: only directories, deepest first (cgroupfs
// refuses to remove the control files, and removing the directories takes them along).
func removeCgroup(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}
