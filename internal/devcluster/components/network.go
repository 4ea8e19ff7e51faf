package components

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/antispoof"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

func linkCNIPlugins(e Env, ciliumDir string) error {
	dir := e.Cfg.CNIBinDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	links := map[string]string{
		"cilium-cni": filepath.Join(ciliumDir, "cilium-cni"),
		// Our anti-spoofing plugin, built with our other binaries (buildOurs).
		antispoof.PluginType: e.Cfg.Path("bin", "cni-antispoof"),
	}
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
// plugin on our bridge with host-local IPAM keeping its leases in the state dir; our
// anti-spoofing plugin, which lets the pod's bridge port pass only frames from the pod's own
// MAC, IPs and ARP sender (the router names tokenless callers by source IP; issue 37); then
// cilium-cni chained (generic-veth) to make the pod a Cilium endpoint that policies apply to.
// Anti-spoofing comes right after the bridge, so the port is guarded before anything else
// runs, and reads the bridge plugin's own result. containerd adds the loopback plugin for the
// pod's lo by itself.
func writeCNIConfig(e Env) error {
	if err := linkCNIPlugins(e, e.Bins.Cilium); err != nil {
		return err
	}
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       spec.CNINetwork,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      spec.BridgeName,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": e.Cfg.Path("cni", "ipam"),
				"ranges": [][]map[string]string{{{
					"subnet": spec.PodSubnet, "rangeStart": spec.PodRangeFrom, "rangeEnd": spec.PodRangeTo, "gateway": spec.BridgeIP,
				}}},
				// The pods' default route, through the gateway on the bridge (isGateway).
				"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
			},
		}, map[string]any{"type": antispoof.PluginType}, map[string]any{"type": "cilium-cni", "chaining-mode": "generic-veth"}},
	}
	dir := e.Cfg.Path("cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(conf, "", "  ")
	return os.WriteFile(filepath.Join(dir, "10-agent-sandbox-dev.conflist"), data, 0o644)
}

// cniConfigStep writes the pod network's CNI config and plugin links into the state dir.
type cniConfigStep struct{ env Env }

func (cniConfigStep) Name() string { return "cni-config" }

func (s cniConfigStep) Up(context.Context) error { return writeCNIConfig(s.env) }

func (cniConfigStep) Down(context.Context) error { return nil }
