package components

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// kubeletConfig: x509 client auth from our CA plus webhook authorization (the apiserver's
// kubelet client is system:masters), cgroupfs on cgroup v1, every directory in the state dir,
// CoreDNS as cluster DNS (dnsPolicy ClusterFirst pods); pods with dnsPolicy Default (CoreDNS
// itself) get a resolv.conf naming only their own loopback: nothing in a dev sandbox resolves
// names off this machine. Eviction thresholds are low enough not to evict on a busy dev box.
func kubeletConfig(e Env) string {
	pki := e.Cfg.Path("pki")
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s/ca.crt
authorization:
  mode: Webhook
tlsCertFile: %s/kubelet-serving.crt
tlsPrivateKeyFile: %s/kubelet-serving.key
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
clusterDomain: cluster.local
clusterDNS: [%s]
resolvConf: %s
podLogsDir: %s
volumePluginDir: %s
serializeImagePulls: false
maxPods: 250
rotateCertificates: false
serverTLSBootstrap: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%%
  imagefs.available: 2%%
imageGCHighThresholdPercent: 98
imageGCLowThresholdPercent: 95
`, spec.BridgeIP, e.Cfg.Ports.Kubelet, e.Cfg.Ports.KubeletHealthz, pki, pki, pki, e.Cfg.ContainerdSock(), spec.ClusterDNSIP,
		e.Cfg.Path("kubelet", "resolv.conf"), e.Cfg.Path("pod-logs"), e.Cfg.Path("kubelet", "volume-plugins"))
}

func kubelet(e Env) (proc.Component, error) {
	bin := e.Bins.K8s
	dir := e.Cfg.Path("kubelet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return proc.Component{}, err
	}
	if err := os.WriteFile(e.Cfg.Path("kubelet", "resolv.conf"), []byte("# dnsPolicy Default in the dev cluster: no resolver off this machine; lookups fail at once, locally\nnameserver 127.0.0.1\n"), 0o644); err != nil {
		return proc.Component{}, err
	}
	cfg := e.Cfg.Path("kubelet", "config.yaml")
	if err := os.WriteFile(cfg, []byte(kubeletConfig(e)), 0o644); err != nil {
		return proc.Component{}, err
	}
	return proc.Component{
		Name: "kubelet", Exe: bin + "/kubelet", Timeout: 2 * time.Minute,
		Addrs: []string{spec.BridgeIP + ":" + strconv.Itoa(e.Cfg.Ports.Kubelet), spec.Loopback(e.Cfg.Ports.KubeletHealthz)},
		Args: []string{
			"--config=" + cfg,
			"--kubeconfig=" + e.Cfg.KubeconfigFor("kubelet"),
			"--root-dir=" + dir,
			"--cert-dir=" + e.Cfg.Path("kubelet", "pki"),
			"--hostname-override=" + spec.NodeName,
			"--node-ip=" + spec.BridgeIP,
			"--v=1",
		},
		Ready: kubeletReady(e),
	}, nil
}

// kubeletReady is true when our node reports Ready.
func kubeletReady(e Env) func(context.Context) error { return nodeReady(e, spec.NodeName) }

// nodeReady is true when the named node reports Ready.
func nodeReady(e Env, name string) func(context.Context) error {
	return kube.NodeReady(e.Cfg.KubeconfigPath(), name)
}
