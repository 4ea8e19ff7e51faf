// Package devcluster runs a single-node Kubernetes cluster on this machine without Docker: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, containerd (with runc and the CNI
// bridge plugin), a real kubelet, kube-proxy, Cilium's agent (NetworkPolicy), CoreDNS, optional
// kwok nodes, and the agent-sandbox controller and router. Every process is started detached and recorded by pid in the state
// directory, so Up can be called again (it reuses what runs) and Down stops exactly what Up
// started and undoes the host changes.
package devcluster

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Fixed names and addresses of the cluster. Only loopback, the bridge's own subnet and the
// Service range are used; pod traffic is never masqueraded nor forwarded out of the uplink.
const (
	NodeName     = "agent-sandbox-dev"
	BridgeName   = "sbxdev0"
	cniNetwork   = "agent-sandbox-dev"
	bridgeIP     = "10.244.0.1"
	bridgeCIDR   = "10.244.0.1/16"
	podSubnet    = "10.244.0.0/16"
	podRangeFrom = "10.244.0.2"
	podRangeTo   = "10.244.0.254"
	// Simulated (kwok) pod IPs live inside the bridge's /16 but outside the real range: a stray
	// packet to one stays on our bridge and goes nowhere.
	kwokPodCIDR     = "10.244.128.1/17"
	serviceCIDR     = "10.96.0.0/16"
	clusterDNSIP    = "10.96.0.10" // the kube-dns Service (CoreDNS)
	SystemNS        = "agent-sandbox-system"
	StorageClass    = "standard"
	RuntimeImage    = "agent-sandbox/runtime:dev"
	PauseImage      = "agent-sandbox/pause:dev"
	ControllerImage = "agent-sandbox/controller:dev"
	RouterImage     = "agent-sandbox/router:dev"
	controllerUser  = "system:serviceaccount:" + SystemNS + ":agent-sandbox-controller"
	routerUser      = "system:serviceaccount:" + SystemNS + ":sandbox-router"
)

// Ports on 127.0.0.1 (the API server and the kubelet listen on the bridge address). Non-standard
// numbers so that a cluster started by tests or by hand elsewhere does not collide.
type Ports struct {
	EtcdClient, EtcdPeer int
	APIServer            int // on bridgeIP
	ControllerManager    int
	Scheduler            int
	Kubelet              int // on bridgeIP
	KubeletHealthz       int
	KwokServer           int
	ControllerMetrics    int
	ControllerHealth     int
	ControllerWebhook    int // the CRD conversion webhook, called by the API server
	Router               int // host-process mode
	RouterProbe          int
	RouterNodePort       int // in-cluster mode: the router Service's NodePort, on bridgeIP
	KubeProxyHealthz     int
	KubeProxyMetrics     int
	CiliumHealth         int // cilium-agent's /healthz
}

// DefaultPorts are the ports the cluster uses unless a Config says otherwise.
var DefaultPorts = Ports{
	EtcdClient: 32379, EtcdPeer: 32380,
	APIServer:         36443,
	ControllerManager: 30257,
	Scheduler:         30259,
	Kubelet:           10250,
	KubeletHealthz:    30248,
	KwokServer:        30247,
	ControllerMetrics: 38080,
	ControllerHealth:  38081,
	ControllerWebhook: 38443,
	Router:            18080,
	RouterProbe:       18081,
	RouterNodePort:    31880,
	KubeProxyHealthz:  30256,
	KubeProxyMetrics:  30249,
	CiliumHealth:      39879,
}

// Config says where the cluster lives and what it runs.
type Config struct {
	// Dir holds all state: certificates, data, logs, pids. Default DefaultDir().
	Dir string
	// RepoRoot is the agent-sandbox source tree (to build our binaries and, when missing, the
	// Kubernetes binaries). Default: found by walking up from the working directory.
	RepoRoot string
	// KwokNodes is how many simulated nodes to register (0: none).
	KwokNodes int
	Ports     Ports
	// Out receives progress for people; Log structured logs. Both default to stderr.
	Out io.Writer
	Log *slog.Logger
	// StopTimeout bounds the wait after SIGTERM before SIGKILL (a busy apiserver is slow).
	StopTimeout time.Duration
	// HostProcesses runs our controller and router as processes on the host (fast iteration)
	// instead of as the Helm chart's Deployments.
	HostProcesses bool
}

// DefaultDir is ${XDG_STATE_HOME:-~/.local/state}/agent-sandbox/dev.
func DefaultDir() string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "agent-sandbox", "dev")
}

func (c *Config) withDefaults() (*Config, error) {
	out := *c
	if out.Dir == "" {
		out.Dir = DefaultDir()
	}
	abs, err := filepath.Abs(out.Dir)
	if err != nil {
		return nil, err
	}
	out.Dir = abs
	if out.Ports == (Ports{}) {
		out.Ports = DefaultPorts
	}
	if out.Out == nil {
		out.Out = os.Stderr
	}
	if out.Log == nil {
		out.Log = slog.New(slog.NewTextHandler(out.Out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if out.StopTimeout == 0 {
		out.StopTimeout = 60 * time.Second
	}
	// Unix socket paths are limited to 108 bytes; containerd's lives in the state dir.
	if sock := out.path("run", "containerd.sock"); len(sock) > 100 {
		return nil, fmt.Errorf("state dir %q is too long for a unix socket path; use a shorter --dir", out.Dir)
	}
	return &out, nil
}

func (c *Config) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

// KubeconfigPath is the admin kubeconfig of the cluster.
func (c *Config) KubeconfigPath() string { return c.path("kubeconfig") }

// RouterURL is where the host reaches the sandbox router: its loopback port when it runs on the
// host, else the NodePort of sandbox-router-svc on the node's address.
func (c *Config) RouterURL() string {
	if c.HostProcesses {
		return fmt.Sprintf("http://127.0.0.1:%d", c.Ports.Router)
	}
	return fmt.Sprintf("http://%s:%d", bridgeIP, c.Ports.RouterNodePort)
}

// apiServerURL is where every client of the dev cluster reaches kube-apiserver: the bridge
// address, the one address both the host and the pods (through the kubernetes Service) reach.
func (c *Config) apiServerURL() string {
	return fmt.Sprintf("https://%s:%d", bridgeIP, c.Ports.APIServer)
}

func (c *Config) progress(format string, args ...any) {
	fmt.Fprintf(c.Out, "==> "+format+"\n", args...)
}
