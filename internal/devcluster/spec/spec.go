// Package spec is what every part of the local cluster shares: its fixed names and addresses,
// its ports, and the Config that says where its state lives.
package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Fixed names and addresses of the cluster. Only loopback, the bridge's own subnet and the
// Service range are used; pod traffic is never masqueraded nor forwarded out of the uplink.
const (
	NodeName     = "agent-sandbox-dev"
	BridgeName   = "sbxdev0"
	CNINetwork   = "agent-sandbox-dev"
	BridgeIP     = "10.244.0.1"
	BridgeCIDR   = "10.244.0.1/16"
	PodSubnet    = "10.244.0.0/16"
	PodRangeFrom = "10.244.0.2"
	PodRangeTo   = "10.244.0.254"
	// Simulated (kwok) pod IPs live inside the bridge's /16 but outside the real range: a stray
	// packet to one stays on our bridge and goes nowhere.
	KwokPodCIDR  = "10.244.128.1/17"
	ServiceCIDR  = "10.96.0.0/16"
	ClusterDNSIP = "10.96.0.10" // the kube-dns Service (CoreDNS)
	// TestDNSServer answers the zone test. for CoreDNS: a server the end-to-end tests start in a
	// network namespace of their own, in a documentation range (RFC 5737) outside the pods'.
	TestDNSServer   = "203.0.113.53"
	SystemNS        = "agent-sandbox-system"
	StorageClass    = "standard"
	RuntimeImage    = "agent-sandbox/runtime:dev"
	PauseImage      = "agent-sandbox/pause:dev"
	ControllerImage = "agent-sandbox/controller:dev"
	RouterImage     = "agent-sandbox/router:dev"
	NodeAgentImage  = "agent-sandbox/node-agent:dev"
	ControllerUser  = "system:serviceaccount:" + SystemNS + ":agent-sandbox-controller"
	RouterUser      = "system:serviceaccount:" + SystemNS + ":sandbox-router"
	// HostPathProvisionerUser is the identity of devcluster's PV provisioner (a host process).
	HostPathProvisionerUser = "agent-sandbox-dev:hostpath-provisioner"
)

// Ports on 127.0.0.1 (the API server and the kubelet listen on the bridge address). Non-standard
// numbers so that a cluster started by tests or by hand elsewhere does not collide.
type Ports struct {
	EtcdClient, EtcdPeer int
	APIServer            int // on BridgeIP
	ControllerManager    int
	Scheduler            int
	Kubelet              int // on BridgeIP
	KubeletHealthz       int
	KwokServer           int
	ControllerMetrics    int
	ControllerHealth     int
	ControllerWebhook    int // the CRD conversion webhook, called by the API server
	Router               int // host-process mode
	RouterProbe          int
	RouterNodePort       int // in-cluster mode: the router Service's NodePort, on BridgeIP
	RouterE2BNodePort    int // in-cluster mode: the NodePort of the router's E2B port
	KubeProxyHealthz     int
	KubeProxyMetrics     int
	CiliumHealth         int // cilium-agent's /healthz
	ProvisionerHealth    int // devcluster hostpath-provisioner's /healthz
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
	// The fixed NodePorts sit in the range's static band (30000–30085 of 30000–32767), which
	// kube-apiserver leaves to ports asked for by number: in the upper band a port the chart's
	// own Service got at random (its other ports) could already hold one of them.
	RouterNodePort:    30080,
	RouterE2BNodePort: 30081,
	KubeProxyHealthz:  30256,
	KubeProxyMetrics:  30249,
	CiliumHealth:      39879,
	ProvisionerHealth: 30258,
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
	// SandboxRuntime is the runtime of the sandboxes' pods: SandboxRuntimeGVisor (the controller
	// gives them RuntimeClass gvisor) or SandboxRuntimeRunc (no RuntimeClass). Default: $SANDBOX_RUNTIME,
	// else gvisor.
	SandboxRuntime string
	// HibernateDir is where each pod's runsc shim serves its hibernate socket,
	// <dir>/<64 hex>_sandbox.sock, for the node agent (docs/snapshots.md). A Unix socket's path has
	// at most 107 bytes, which the state dir would pass, so it is outside it; made at up and
	// removed at down. Default DefaultHibernateDir.
	HibernateDir string
}

// DefaultHibernateDir is Config.HibernateDir's default.
const DefaultHibernateDir = "/run/agent-sandbox-hib"

// The sandboxes' runtimes. Both are always configured in containerd; this picks the default the
// controller gives sandbox pods.
const (
	SandboxRuntimeGVisor = "gvisor"
	SandboxRuntimeRunc   = "runc"
	// SandboxRuntimeEnv overrides the default runtime (make test, make demo).
	SandboxRuntimeEnv = "SANDBOX_RUNTIME"
	// GVisorRuntimeClass is the RuntimeClass of gVisor pods; its handler is containerd's runsc
	// runtime.
	GVisorRuntimeClass = "gvisor"
	RunscHandler       = "runsc"
)

// DefaultDir is ${XDG_STATE_HOME:-~/.local/state}/agent-sandbox/dev.
func DefaultDir() string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "agent-sandbox", "dev")
}

// WithDefaults returns a copy with every unset field defaulted and Dir made absolute.
func (c *Config) WithDefaults() (*Config, error) {
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
	if out.HibernateDir == "" {
		out.HibernateDir = DefaultHibernateDir
	}
	if out.StopTimeout == 0 {
		out.StopTimeout = 60 * time.Second
	}
	if out.SandboxRuntime == "" {
		out.SandboxRuntime = os.Getenv(SandboxRuntimeEnv)
	}
	switch out.SandboxRuntime {
	case "":
		out.SandboxRuntime = SandboxRuntimeGVisor
	case SandboxRuntimeGVisor, SandboxRuntimeRunc:
	default:
		return nil, fmt.Errorf("sandbox runtime %q: want %s or %s", out.SandboxRuntime, SandboxRuntimeGVisor, SandboxRuntimeRunc)
	}
	// Unix socket paths are limited to 108 bytes; containerd's lives in the state dir.
	if sock := out.ContainerdSock(); len(sock) > 100 {
		return nil, fmt.Errorf("state dir %q is too long for a unix socket path; use a shorter --dir", out.Dir)
	}
	return &out, nil
}

// Path is a path inside the state dir.
func (c *Config) Path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

// KubeconfigPath is the admin kubeconfig of the cluster.
func (c *Config) KubeconfigPath() string { return c.Path("kubeconfig") }

// KubeconfigFor is the kubeconfig of one identity (see pki).
func (c *Config) KubeconfigFor(id string) string { return c.Path("kubeconfigs", id+".kubeconfig") }

// RouterTokenPath is the file `dev up` writes the developer's router token to.
func (c *Config) RouterTokenPath() string { return c.Path("router-token") }

// ContainerdSock is the cluster's containerd socket.
func (c *Config) ContainerdSock() string { return c.Path("run", "containerd.sock") }

// CNIBinDir is containerd's CNI plugin dir: links to the Debian plugins and to cilium-cni, so
// that nothing is added to /usr/lib/cni.
func (c *Config) CNIBinDir() string { return c.Path("cni", "bin") }

// RunscDir holds runsc's config (runsc.toml) and its root (containers' state); logs go to
// logs/runsc. Down removes it.
func (c *Config) RunscDir() string { return c.Path("runsc") }

// SandboxRuntimeClass is the RuntimeClass the controller gives sandbox pods ("" for none: runc).
func (c *Config) SandboxRuntimeClass() string {
	if c.SandboxRuntime == SandboxRuntimeGVisor {
		return GVisorRuntimeClass
	}
	return ""
}

// OurBin is one of our binaries built from the source tree.
func (c *Config) OurBin(name string) string { return c.Path("bin", name) }

// RouterURL is where the host reaches the sandbox router: its loopback port when it runs on the
// host, else the NodePort of sandbox-router-svc on the node's address.
func (c *Config) RouterURL() string {
	if c.HostProcesses {
		return fmt.Sprintf("http://127.0.0.1:%d", c.Ports.Router)
	}
	return fmt.Sprintf("http://%s:%d", BridgeIP, c.Ports.RouterNodePort)
}

// E2BURL is where the host reaches the router's E2B port (E2B_API_URL and E2B_SANDBOX_URL of
// an E2B program); "" when the router runs on the host, which serves no E2B port.
func (c *Config) E2BURL() string {
	if c.HostProcesses {
		return ""
	}
	return fmt.Sprintf("http://%s:%d", BridgeIP, c.Ports.RouterE2BNodePort)
}

// APIServerURL is where every client of the dev cluster reaches kube-apiserver: the bridge
// address, the one address both the host and the pods (through the kubernetes Service) reach.
func (c *Config) APIServerURL() string {
	return fmt.Sprintf("https://%s:%d", BridgeIP, c.Ports.APIServer)
}

// WebhookPort is the host-process controller's conversion webhook port.
func (c *Config) WebhookPort() int {
	if c.Ports.ControllerWebhook != 0 {
		return c.Ports.ControllerWebhook
	}
	return DefaultPorts.ControllerWebhook
}

// Progress tells the user what happens next.
func (c *Config) Progress(format string, args ...any) {
	fmt.Fprintf(c.Out, "==> "+format+"\n", args...)
}

// Loopback is a TCP address on 127.0.0.1.
func Loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// BridgeAddr is a TCP address on the node's (bridge) address.
func BridgeAddr(port int) string { return BridgeIP + ":" + strconv.Itoa(port) }

const modulePath = "github.com/agent-sandbox/agent-sandbox"

// FindRepoRoot walks up from dir to the go.mod of this module.
func FindRepoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(data), []byte("module "+modulePath+"\n")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("not inside the agent-sandbox source tree (run from the repository, or pass its path)")
		}
	}
}

// ResolveRepoRoot sets RepoRoot, found from the working directory, when it is unset.
func (c *Config) ResolveRepoRoot() (string, error) {
	if c.RepoRoot != "" {
		return c.RepoRoot, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := FindRepoRoot(wd)
	if err != nil {
		return "", err
	}
	c.RepoRoot = root
	return root, nil
}

// FileExists reports whether p exists (following links).
func FileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
