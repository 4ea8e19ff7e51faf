package components

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

//go:embed manifests/*.yaml
var manifests embed.FS

// install applies our CRDs, the namespace, and what the dev cluster adds (default spec.StorageClass,
// node reads), server-side, so that running it again converges instead of failing. With host
// processes it also applies config/rbac (the in-cluster install's service accounts, roles and
// bindings) and points the CRDs' conversion at the host's webhook; otherwise the chart's
// release brings its own RBAC and the CRDs convert through its webhook Service.
func (c *Cluster) install(ctx context.Context) error {
	cl, err := kube.Client(c.KubeconfigPath())
	if err != nil {
		return err
	}
	crds, err := c.crds()
	if err != nil {
		return err
	}
	if err := kube.ApplyAll(ctx, cl, crds); err != nil {
		return err
	}
	for _, crd := range crds {
		if err := c.Proc.WaitUntil(ctx, "CRD "+crd.GetName(), nil, time.Minute, kube.CRDEstablished(cl, crd.GetName())); err != nil {
			return err
		}
	}
	// The namespace, service accounts, roles and bindings of an in-cluster install: our host
	// processes authenticate as those service accounts, so they get exactly that access.
	ns, err := kube.ReadYAMLFile(filepath.Join(c.RepoRoot, "config", "manager", "namespace.yaml"))
	if err != nil {
		return err
	}
	var rbac []*unstructured.Unstructured
	if c.HostProcesses {
		if rbac, err = kube.ReadYAMLDir(filepath.Join(c.RepoRoot, "config", "rbac")); err != nil {
			return err
		}
	}
	if err := c.replaceForeignStorageClass(ctx); err != nil {
		return err
	}
	own, err := manifests.ReadFile("manifests/cluster.yaml")
	if err != nil {
		return err
	}
	ours, err := kube.DecodeYAML(bytes.NewReader(own))
	if err != nil {
		return err
	}
	return kube.ApplyAll(ctx, cl, slices.Concat(ns, rbac, ours))
}

// crds are the chart's CRDs (conversion through the webhook Service), or config/'s pointed at
// the host-process controller's webhook.
func (c *Cluster) crds() ([]*unstructured.Unstructured, error) {
	if !c.HostProcesses {
		return kube.ReadYAMLDir(filepath.Join(c.RepoRoot, "charts", "agent-sandbox", "crds"))
	}
	crds, err := kube.ReadYAMLDir(filepath.Join(c.RepoRoot, "config", "crd", "bases"))
	if err != nil {
		return nil, err
	}
	return crds, c.convertThroughWebhook(crds)
}

// installAgentSandbox applies the CRDs and the cluster's own objects, then runs the controller
// and router.
func (c *Cluster) installAgentSandbox(ctx context.Context, helm string, hostProcesses []proc.Component) error {
	c.Progress("installing CRDs, RBAC and the default StorageClass")
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
func (c *Cluster) installOurs(ctx context.Context, helm string, hostProcesses []proc.Component) error {
	if err := c.recordMode(); err != nil {
		return err
	}
	if !c.HostProcesses {
		return c.installChart(ctx, helm)
	}
	for _, comp := range hostProcesses {
		if err := c.Proc.Ensure(ctx, comp); err != nil {
			return err
		}
	}
	return nil
}

// controller runs our controller on the host under its service account's identity (see
// certSpecs), so config/rbac is what authorizes it, as in a real install.
func (c *Cluster) controller() proc.Component {
	return proc.Component{
		Name: "agent-sandbox-controller", Exe: c.OurBin("controller"), Timeout: time.Minute,
		Addrs: []string{spec.Loopback(c.Ports.ControllerMetrics), spec.Loopback(c.Ports.ControllerHealth), spec.Loopback(c.WebhookPort())},
		Args: append([]string{
			"--kubeconfig=" + c.KubeconfigFor("controller"),
			"--metrics-bind-address=" + spec.Loopback(c.Ports.ControllerMetrics),
			"--health-probe-bind-address=" + spec.Loopback(c.Ports.ControllerHealth),
			"--zap-log-level=info",
			// Leader election is on, as in every install; outside a pod it needs a namespace.
			"--leader-election-namespace=" + spec.SystemNS,
		}, c.webhookArgs()...),
		Ready: func(ctx context.Context) error {
			return proc.HTTPOK(ctx, nil, fmt.Sprintf("http://%s/readyz", spec.Loopback(c.Ports.ControllerHealth)), "ok")
		},
	}
}

// router listens on a fixed loopback port; from the host it reaches pod IPs over the bridge.
func (c *Cluster) router() proc.Component {
	return proc.Component{
		Name: "sandbox-router", Exe: c.OurBin("router"), Timeout: time.Minute,
		Addrs: []string{spec.Loopback(c.Ports.Router), spec.Loopback(c.Ports.RouterProbe)},
		Args: []string{
			"--kubeconfig=" + c.KubeconfigFor("router"),
			"--listen=" + spec.Loopback(c.Ports.Router),
			"--probe-listen=" + spec.Loopback(c.Ports.RouterProbe),
		},
		Ready: func(ctx context.Context) error {
			return proc.HTTPOK(ctx, nil, fmt.Sprintf("http://%s/readyz", spec.Loopback(c.Ports.RouterProbe)), "")
		},
	}
}
