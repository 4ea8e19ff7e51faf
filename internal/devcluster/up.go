package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Cluster describes a running dev cluster.
type Cluster struct {
	Dir        string
	Kubeconfig string
	RouterURL  string
	// RouterToken is a bearer token the router accepts from the host (a ServiceAccount's, bound
	// to agent-sandbox-user cluster-wide); it is also in RouterTokenFile.
	RouterToken     string
	RouterTokenFile string
	// Reused is set when every component was already running.
	Reused bool
}

// Up brings the cluster up, or completes and reuses one that is (partly) running. It is safe to
// call repeatedly: running components are kept, our own binaries are rebuilt and a component
// whose binary changed is restarted.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the dev cluster runs containerd and a kubelet: run as root")
	}
	start := time.Now()
	if _, err := c.repoRoot(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	wasRunning := c.allRunning()
	bin, ciliumDir, err := c.ensureBinaries(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.prepareHost(ciliumDir); err != nil {
		return nil, err
	}
	ctrd, err := c.containerd()
	if err != nil {
		return nil, err
	}
	kubelet, err := c.kubelet(bin)
	if err != nil {
		return nil, err
	}
	ours, err := c.hostProcessComponents()
	if err != nil {
		return nil, err
	}
	core := []component{c.etcd(bin), c.apiserver(bin), c.controllerManager(bin), c.scheduler(bin), ctrd, kubelet}
	network, err := c.networkComponents(bin, ciliumDir)
	if err != nil {
		return nil, err
	}
	if err := c.preflight(slices.Concat(core, network, ours)); err != nil {
		return nil, err
	}
	if err := c.ensureCore(ctx, core); err != nil {
		return nil, err
	}
	if err := c.ensureNetwork(ctx, bin, ciliumDir, network); err != nil {
		return nil, err
	}
	if err := c.ensureKwok(ctx, bin); err != nil {
		return nil, err
	}
	if err := c.installAgentSandbox(ctx, filepath.Join(bin, "helm"), ours); err != nil {
		return nil, err
	}
	if err := c.waitDNS(ctx); err != nil {
		return nil, err
	}
	token, err := c.writeRouterToken(ctx)
	if err != nil {
		return nil, err
	}
	cl := &Cluster{Dir: c.Dir, Kubeconfig: c.KubeconfigPath(), RouterURL: c.RouterURL(), Reused: wasRunning,
		RouterToken: token, RouterTokenFile: c.RouterTokenPath()}
	c.progress("cluster ready in %s", time.Since(start).Round(100*time.Millisecond))
	fmt.Fprintf(c.Out, `
  export KUBECONFIG=%s
  kubectl get nodes            # (%s/kubectl is version-matched)
  router: %s  (X-Sandbox-ID: <sandbox name>, Authorization: Bearer <token>)
  export SBX_ROUTER=%s SBX_ROUTER_TOKEN=$(cat %s)   # for sbx
  stop and clean up: dev down
`, cl.Kubeconfig, bin, cl.RouterURL, cl.RouterURL, cl.RouterTokenFile)
	return cl, nil
}

// ensureBinaries installs the node packages and builds what is missing: the Kubernetes
// binaries, Cilium, and (incrementally) ours. It returns the Kubernetes and Cilium folders.
func (c *Config) ensureBinaries(ctx context.Context) (bin, ciliumDir string, err error) {
	if err := c.ensureNodeDeps(ctx); err != nil {
		return "", "", fmt.Errorf("installing node packages: %w", err)
	}
	if bin, err = c.ensureK8sBinaries(ctx); err != nil {
		return "", "", err
	}
	if ciliumDir, err = c.ensureCilium(ctx); err != nil {
		return "", "", err
	}
	return bin, ciliumDir, c.buildOurs(ctx)
}

// prepareHost makes the certificates, records the host as it is (first time), then makes the
// pod network: the bridge, forwarding, the CNI plugins and their config.
func (c *Config) prepareHost(ciliumDir string) error {
	if err := c.ensurePKI(); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if err := c.recordHost(); err != nil {
		return fmt.Errorf("recording host state: %w", err)
	}
	if mounted, err := ensureNetnsMount(); mounted || err != nil {
		if uerr := c.updateHost(func(hs *hostState) { hs.NetnsMounted = hs.NetnsMounted || mounted }); uerr != nil {
			return errors.Join(err, uerr)
		}
		if err != nil {
			return err
		}
	}
	if err := c.ensureBridge(); err != nil {
		return fmt.Errorf("pod bridge: %w", err)
	}
	return c.writeCNIConfig(ciliumDir)
}

// networkComponents are kube-proxy and cilium-agent, in start order.
func (c *Config) networkComponents(bin, ciliumDir string) ([]component, error) {
	kp, err := c.kubeProxy(bin)
	if err != nil {
		return nil, err
	}
	agent, err := c.ciliumAgent(ciliumDir)
	if err != nil {
		return nil, err
	}
	return []component{kp, agent}, nil
}

// ensureNetwork runs, once the node is Ready and before any pod needs them, kube-proxy
// (Services), cilium-agent (NetworkPolicy; with its CRDs and CiliumNode) and applies CoreDNS,
// whose readiness Up waits for at the end.
func (c *Config) ensureNetwork(ctx context.Context, bin, ciliumDir string, comps []component) error {
	for _, comp := range comps {
		if comp.name == "cilium-agent" && c.running(comp.name) == nil {
			if err := c.prepareCilium(ctx, ciliumDir); err != nil {
				return fmt.Errorf("preparing Cilium: %w", err)
			}
		}
		if err := c.ensure(ctx, comp); err != nil {
			return err
		}
	}
	return c.applyDNS(ctx, bin)
}

// hostProcessComponents are the controller and router as host processes (restarting one whose
// binary was rebuilt), or none when the chart runs them.
func (c *Config) hostProcessComponents() ([]component, error) {
	if !c.HostProcesses {
		return nil, nil
	}
	for _, name := range []string{"agent-sandbox-controller", "sandbox-router"} {
		if err := c.restartIfReplaced(name); err != nil {
			return nil, err
		}
	}
	return []component{c.controller(), c.router()}, nil
}

// ensureCore starts the control plane, containerd and the kubelet in order.
func (c *Config) ensureCore(ctx context.Context, core []component) error {
	for _, comp := range core {
		if err := c.ensure(ctx, comp); err != nil {
			return err
		}
		if comp.name == "containerd" {
			// Before the kubelet: it must find the pause image when it starts pods.
			c.progress("importing images %s and %s into containerd", RuntimeImage, PauseImage)
			if err := c.importImages(ctx, "runtime", "pause"); err != nil {
				return err
			}
		}
	}
	return nil
}

// installAgentSandbox applies the CRDs and the cluster's own objects, then runs the controller
// and router.
func (c *Config) installAgentSandbox(ctx context.Context, helm string, hostProcesses []component) error {
	c.progress("installing CRDs, RBAC and the default StorageClass")
	if c.HostProcesses {
		// Before install: the release's roles share names with config/rbac's, and uninstalling
		// deletes them.
		if err := c.uninstallChart(ctx, helm); err != nil {
			return err
		}
	}
	if err := c.install(ctx); err != nil {
		return err
	}
	return c.installOurs(ctx, helm, hostProcesses)
}

// installOurs runs the controller and router: as the Helm chart's Deployments, or as host
// processes (then without a release of the chart).
func (c *Config) installOurs(ctx context.Context, helm string, hostProcesses []component) error {
	if err := c.recordMode(); err != nil {
		return err
	}
	if !c.HostProcesses {
		return c.installChart(ctx, helm)
	}
	for _, comp := range hostProcesses {
		if err := c.ensure(ctx, comp); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) ensureKwok(ctx context.Context, bin string) error {
	if c.KwokNodes <= 0 {
		return nil
	}
	comp, err := c.kwok(ctx, bin)
	if err != nil {
		return err
	}
	if err := c.ensure(ctx, comp); err != nil {
		return err
	}
	c.progress("registering %d simulated (kwok) nodes", c.KwokNodes)
	return c.ensureKwokNodes(ctx)
}

// preflight refuses to start anything when a port of a component that is not running is taken,
// so that a conflict is reported before half a cluster is up.
func (c *Config) preflight(comps []component) error {
	var errs []error
	for _, comp := range comps {
		if c.running(comp.name) != nil {
			continue
		}
		for _, a := range comp.addrs {
			if err := portFree(a); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", comp.name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// restartIfReplaced stops a running component whose binary was rebuilt since it started, so
// that `up` after a code change runs the new code.
func (c *Config) restartIfReplaced(name string) error {
	r := c.running(name)
	if r == nil {
		return nil
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", r.PID))
	if err != nil || !strings.HasSuffix(exe, " (deleted)") {
		return nil
	}
	c.progress("restarting %s: its binary was rebuilt", name)
	return c.stop(name)
}

// components lists every process the cluster may run, in start order.
var components = []string{
	"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet",
	"kube-proxy", "cilium-agent", "kwok", "agent-sandbox-controller", "sandbox-router",
}

func (c *Config) allRunning() bool {
	for _, n := range components {
		if n == "kwok" || (!c.HostProcesses && (n == "agent-sandbox-controller" || n == "sandbox-router")) {
			continue
		}
		if c.running(n) == nil {
			return false
		}
	}
	return true
}
