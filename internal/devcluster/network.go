package devcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ensureBridge creates the pod bridge with the node's address before anything needs it: the
// kubelet registers bridgeIP as the node's InternalIP (it refuses loopback), serves on it, and
// the host reaches every pod directly over it. Pods get no default route (isGateway false, no
// masquerade): they reach each other and the host's bridge address, and nothing else.
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
	return runLogged("ip", "link", "set", BridgeName, "up")
}

// writeCNIConfig writes the network containerd's CRI plugin sets up for each pod: the bridge
// plugin on our bridge with host-local IPAM keeping its leases in the state dir. containerd adds
// the loopback plugin for the pod's lo by itself.
func (c *Config) writeCNIConfig() error {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       cniNetwork,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      BridgeName,
			"isGateway":   false,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": c.path("cni", "ipam"),
				"ranges": [][]map[string]string{{{
					"subnet": podSubnet, "rangeStart": podRangeFrom, "rangeEnd": podRangeTo, "gateway": bridgeIP,
				}}},
			},
		}},
	}
	dir := c.path("cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(conf, "", "  ")
	return os.WriteFile(filepath.Join(dir, "10-agent-sandbox-dev.conflist"), data, 0o644)
}

// teardownNetwork removes pod netns files, our iptables chains, the bridge, libcni's cached
// results for our network, and restores ip_forward.
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
	for key, chains := range hs.Chains {
		if err := removeChains(key, ourChains(key, chains)); err != nil {
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
