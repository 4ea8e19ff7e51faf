package devcluster

import (
	"context"
	"fmt"
	"os"
	"time"
)

// kubeProxyConfig: iptables mode for the pod network, NodePorts only on the node's (bridge)
// address, and nothing changed on the host beyond its iptables chains: no conntrack sysctls
// (maxPerCore 0 and zero timeouts leave them as they are) and no localhost NodePorts (they
// would set net.ipv4.conf.all.route_localnet=1).
func (c *Config) kubeProxyConfig() string {
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
`, c.kubeconfigFor("kube-proxy"), NodeName, podSubnet, bridgeIP,
		loopback(c.Ports.KubeProxyHealthz), loopback(c.Ports.KubeProxyMetrics), bridgeIP)
}

// kubeProxy makes ClusterIP and NodePort Services work, from pods (bridged traffic passes
// iptables: see enableBridgeNetfilter) and from the host. bindAddress is how it learns the
// node's IP (the bridge address). It runs as system:kube-proxy, which
// the built-in system:node-proxier binding authorizes.
func (c *Config) kubeProxy(bin string) (component, error) {
	if err := os.MkdirAll(c.path("kube-proxy"), 0o755); err != nil {
		return component{}, err
	}
	// kube-proxy exits on any write to its config file: write only a changed config, and stop
	// the running one first so that the next ensure starts it with the new one.
	cfg := c.path("kube-proxy", "config.yaml")
	if cur, err := os.ReadFile(cfg); err != nil || string(cur) != c.kubeProxyConfig() {
		if err := c.stop("kube-proxy"); err != nil {
			return component{}, err
		}
		if err := os.WriteFile(cfg, []byte(c.kubeProxyConfig()), 0o644); err != nil {
			return component{}, err
		}
	}
	return component{
		name: "kube-proxy", exe: bin + "/kube-proxy", timeout: time.Minute,
		addrs: []string{loopback(c.Ports.KubeProxyHealthz), loopback(c.Ports.KubeProxyMetrics)},
		args:  []string{"--config=" + cfg, "--v=1"},
		ready: c.kubeProxyReady,
	}, nil
}

// kubeProxyReady: healthz answers 200 once the rules were synced (503 before).
func (c *Config) kubeProxyReady(ctx context.Context) error {
	return httpOK(ctx, nil, fmt.Sprintf("http://%s/healthz", loopback(c.Ports.KubeProxyHealthz)), "")
}
