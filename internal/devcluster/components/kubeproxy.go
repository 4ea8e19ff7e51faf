package components

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// kubeProxyConfig: iptables mode for the pod network, NodePorts only on the node's (bridge)
// address, and little changed on the host beyond its iptables chains: conntrack's table sizes
// and timeouts as they are (maxPerCore 0, zero timeouts) and no localhost NodePorts (they would
// set net.ipv4.conf.all.route_localnet=1). tcpBeLiberal is on: a pod's packets to another pod
// through a ClusterIP go through this host (Cilium translated the address at the pod's veth, and
// the frame is addressed to the gateway), while the answers are bridged straight back, and bridged
// frames skip iptables (hostnet.Sysctls). Conntrack sees one direction only and calls the rest of
// the connection INVALID; with the liberal setting kube-proxy installs no rule that drops INVALID
// packets (it sets nf_conntrack_tcp_be_liberal, which hostnet.Sysctls records and restores).
func kubeProxyConfig(e Env) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: %s
metricsBindAddress: %s
nodePortAddresses: ["%s/32"]
iptables:
  localhostNodePorts: false
  syncPeriod: 30s
  minSyncPeriod: 1s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  tcpBeLiberal: true
`, e.Cfg.KubeconfigFor("kube-proxy"), spec.NodeName, spec.PodSubnet, spec.BridgeIP,
		spec.Loopback(e.Cfg.Ports.KubeProxyHealthz), spec.Loopback(e.Cfg.Ports.KubeProxyMetrics), spec.BridgeIP)
}

// kubeProxy makes ClusterIP and NodePort Services work, from pods (bridged traffic passes
// iptables: see enableBridgeNetfilter) and from the host. bindAddress is how it learns the
// node's IP (the bridge address). It runs as system:kube-proxy, which
// the built-in system:node-proxier binding authorizes.
func kubeProxy(e Env) (proc.Component, error) {
	bin := e.Bins.K8s
	if err := os.MkdirAll(e.Cfg.Path("kube-proxy"), 0o755); err != nil {
		return proc.Component{}, err
	}
	// kube-proxy exits on any write to its config file: write only a changed config, and stop
	// the running one first so that the next ensure starts it with the new one.
	cfg := e.Cfg.Path("kube-proxy", "config.yaml")
	if cur, err := os.ReadFile(cfg); err != nil || string(cur) != kubeProxyConfig(e) {
		if err := e.Proc.Stop("kube-proxy"); err != nil {
			return proc.Component{}, err
		}
		if err := os.WriteFile(cfg, []byte(kubeProxyConfig(e)), 0o644); err != nil {
			return proc.Component{}, err
		}
	}
	return proc.Component{
		Name: "kube-proxy", Exe: bin + "/kube-proxy", Timeout: time.Minute,
		Addrs: []string{spec.Loopback(e.Cfg.Ports.KubeProxyHealthz), spec.Loopback(e.Cfg.Ports.KubeProxyMetrics)},
		Args:  []string{"--config=" + cfg, "--v=1"},
		Ready: kubeProxyReady(e),
	}, nil
}

// kubeProxyReady: healthz answers 200 once the rules were synced (503 before).
func kubeProxyReady(e Env) func(context.Context) error {
	url := fmt.Sprintf("http://%s/healthz", spec.Loopback(e.Cfg.Ports.KubeProxyHealthz))
	return func(ctx context.Context) error { return proc.HTTPOK(ctx, nil, url, "") }
}
