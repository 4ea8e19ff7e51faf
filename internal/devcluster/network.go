package devcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// ensureBridge creates the pod bridge with the node's address before anything needs it: the
// kubelet registers bridgeIP as the node's InternalIP (it refuses loopback), serves on it, the
// API server listens there, and the host reaches every pod directly over it. Pods get a default
// route through it (isGateway) to reach ClusterIPs and this machine; nothing is masqueraded,
// and forwarding from the bridge out of the machine's uplink is dropped (ensureForwardGuard).
func (c *Config) ensureBridge() error {
	if exec.Command("ip", "link", "show", BridgeName).Run() != nil {
		if err := runLogged("ip", "link", "add", BridgeName, "type", "bridge"); err != nil {
			return err
		}
	}
	out, _ := exec.Command("ip", "-o", "addr", "show", "dev", BridgeName).Output()
	if !strings.Contains(string(out), " "+bridgeCIDR+" ") {
		if err := runLogged("ip", "addr", "add", bridgeCIDR, "dev", BridgeName); err != nil {
			return err
		}
	}
	if err := runLogged("ip", "link", "set", BridgeName, "up"); err != nil {
		return err
	}
	// Service addresses go to the bridge: host → ClusterIP never leaves by the default route
	// (kube-proxy rewrites it to a pod or to the API server on the bridge address).
	if err := runLogged("ip", "route", "replace", serviceCIDR, "dev", BridgeName, "src", bridgeIP); err != nil {
		return err
	}
	if err := enableForwarding(); err != nil {
		return err
	}
	return ensureForwardGuard()
}

// cniBinDir is containerd's CNI plugin dir: links to the Debian plugins and to cilium-cni, so
// that nothing is added to /usr/lib/cni.
func (c *Config) cniBinDir() string { return c.path("cni", "bin") }

func (c *Config) linkCNIPlugins(ciliumDir string) error {
	dir := c.cniBinDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	links := map[string]string{"cilium-cni": filepath.Join(ciliumDir, "cilium-cni")}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		links[p] = filepath.Join("/usr/lib/cni", p)
	}
	for name, target := range links {
		p := filepath.Join(dir, name)
		if cur, err := os.Readlink(p); err == nil && cur == target {
			continue
		}
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return err
		}
	}
	return nil
}

// writeCNIConfig writes the network containerd's CRI plugin sets up for each pod: the bridge
// plugin on our bridge with host-local IPAM keeping its leases in the state dir, then cilium-cni
// chained (generic-veth) to make the pod a Cilium endpoint that policies apply to. containerd
// adds the loopback plugin for the pod's lo by itself.
func (c *Config) writeCNIConfig(ciliumDir string) error {
	if err := c.linkCNIPlugins(ciliumDir); err != nil {
		return err
	}
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       cniNetwork,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      BridgeName,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": c.path("cni", "ipam"),
				"ranges": [][]map[string]string{{{
					"subnet": podSubnet, "rangeStart": podRangeFrom, "rangeEnd": podRangeTo, "gateway": bridgeIP,
				}}},
				// The pods' default route, through the gateway on the bridge (isGateway).
				"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
			},
		}, map[string]any{"type": "cilium-cni", "chaining-mode": "generic-veth"}},
	}
	dir := c.path("cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(conf, "", "  ")
	return os.WriteFile(filepath.Join(dir, "10-agent-sandbox-dev.conflist"), data, 0o644)
}

// teardownNetwork removes pod netns files, our iptables chains (kube-proxy's, the CNI plugins',
// Cilium's, ours), the bridge, libcni's cached results for our network, the nft tables left
// empty, the bpffs mount if Up made it, and restores the recorded sysctls.
func (c *Config) teardownNetwork(hs *hostState) error {
	var errs []error
	before := map[string]bool{}
	for _, n := range hs.Netns {
		before[n] = true
	}
	for _, n := range listNetns() {
		if !before[n] && strings.HasPrefix(n, "cni-") {
			if err := runLogged("ip", "netns", "delete", n); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, key := range iptablesTables() {
		// A table not in the record (an older one) had none of our chains before.
		if err := removeChains(key, ourChains(key, hs.Chains[key])); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	if exec.Command("ip", "link", "show", BridgeName).Run() == nil {
		if err := runLogged("ip", "link", "delete", BridgeName); err != nil {
			errs = append(errs, err)
		}
	}
	results, _ := filepath.Glob("/var/lib/cni/results/" + cniNetwork + "-*")
	for _, r := range results {
		if err := os.Remove(r); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, removeEmptyNftTables(hs.NftTables))
	if hs.NetnsMounted && netnsDirMounted() {
		// Detached, not plain: a namespace someone else mounted there keeps working.
		if err := syscall.Unmount(netnsDir, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", netnsDir, err))
		}
	}
	if hs.BPFFSMounted && bpffsMounted() {
		if err := syscall.Unmount(bpffsPath, 0); err != nil {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", bpffsPath, err))
		}
	}
	errs = append(errs, restoreSysctls(hs.Sysctls))
	if hs.IPForward != "" {
		cur, _ := os.ReadFile(ipForwardPath)
		if strings.TrimSpace(string(cur)) != hs.IPForward {
			if err := os.WriteFile(ipForwardPath, []byte(hs.IPForward+"\n"), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring ip_forward: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}
