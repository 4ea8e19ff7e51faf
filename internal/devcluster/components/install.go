package components

import (
	"bytes"
	"context"
	"embed"
	"errors"
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
func install(ctx context.Context, e Env) error {
	cl, err := kube.Client(e.Cfg.KubeconfigPath())
	if err != nil {
		return err
	}
	crds, err := crds(e)
	if err != nil {
		return err
	}
	if err := kube.ApplyAll(ctx, cl, crds); err != nil {
		return err
	}
	for _, crd := range crds {
		if err := e.Proc.WaitUntil(ctx, "CRD "+crd.GetName(), nil, time.Minute, kube.CRDEstablished(cl, crd.GetName())); err != nil {
			return err
		}
	}
	// The namespace, service accounts, roles and bindings of an in-cluster install: our host
	// processes authenticate as those service accounts, so they get exactly that access.
	ns, err := kube.ReadYAMLFile(filepath.Join(e.Cfg.RepoRoot, "config", "manager", "namespace.yaml"))
	if err != nil {
		return err
	}
	var rbac []*unstructured.Unstructured
	if e.Cfg.HostProcesses {
		if rbac, err = kube.ReadYAMLDir(filepath.Join(e.Cfg.RepoRoot, "config", "rbac")); err != nil {
			return err
		}
	}
	if err := replaceForeignStorageClass(ctx, e); err != nil {
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
func crds(e Env) ([]*unstructured.Unstructured, error) {
	if !e.Cfg.HostProcesses {
		return kube.ReadYAMLDir(filepath.Join(e.Cfg.RepoRoot, "charts", "agent-sandbox", "crds"))
	}
	crds, err := kube.ReadYAMLDir(filepath.Join(e.Cfg.RepoRoot, "config", "crd", "bases"))
	if err != nil {
		return nil, err
	}
	return crds, convertThroughWebhook(e, crds)
}

// installAgentSandbox applies the CRDs and the cluster's own objects, then runs the controller
// and router.
func installAgentSandbox(ctx context.Context, e Env, helm string, hostProcesses []proc.Component) error {
	e.Cfg.Progress("installing CRDs, RBAC and the default StorageClass")
	if e.Cfg.HostProcesses {
		// Before install: the release's roles share names with config/rbac's, and uninstalling
		// deletes them.
		if err := uninstallChart(ctx, e, helm); err != nil {
			return err
		}
	}
	if err := install(ctx, e); err != nil {
		return err
	}
	return installOurs(ctx, e, helm, hostProcesses)
}

// installOurs runs the controller and router: as the Helm chart's Deployments, or as host
// processes (then without a release of the chart).
func installOurs(ctx context.Context, e Env, helm string, hostProcesses []proc.Component) error {
	if err := recordMode(e); err != nil {
		return err
	}
	if !e.Cfg.HostProcesses {
		return installChart(ctx, e, helm)
	}
	for _, comp := range hostProcesses {
		if err := e.Proc.Ensure(ctx, comp); err != nil {
			return err
		}
	}
	return nil
}

// controller runs our controller on the host under its service account's identity (see
// certSpecs), so config/rbac is what authorizes it, as in a real install.
func controller(e Env) proc.Component {
	return proc.Component{
		Name: "agent-sandbox-controller", Exe: e.Cfg.OurBin("controller"), Timeout: time.Minute,
		Addrs: []string{spec.Loopback(e.Cfg.Ports.ControllerMetrics), spec.Loopback(e.Cfg.Ports.ControllerHealth), spec.Loopback(e.Cfg.WebhookPort())},
		Args: append([]string{
			"--kubeconfig=" + e.Cfg.KubeconfigFor("controller"),
			"--metrics-bind-address=" + spec.Loopback(e.Cfg.Ports.ControllerMetrics),
			"--health-probe-bind-address=" + spec.Loopback(e.Cfg.Ports.ControllerHealth),
			"--zap-log-level=info",
			// Leader election is on, as in every install; outside a pod it needs a namespace.
			"--leader-election-namespace=" + spec.SystemNS,
		}, webhookArgs(e)...),
		Ready: func(ctx context.Context) error {
			return proc.HTTPOK(ctx, nil, fmt.Sprintf("http://%s/readyz", spec.Loopback(e.Cfg.Ports.ControllerHealth)), "ok")
		},
	}
}

// router listens on a fixed loopback port; from the host it reaches pod IPs over the bridge.
func router(e Env) proc.Component {
	return proc.Component{
		Name: "sandbox-router", Exe: e.Cfg.OurBin("router"), Timeout: time.Minute,
		Addrs: []string{spec.Loopback(e.Cfg.Ports.Router), spec.Loopback(e.Cfg.Ports.RouterProbe)},
		Args: []string{
			"--kubeconfig=" + e.Cfg.KubeconfigFor("router"),
			"--listen=" + spec.Loopback(e.Cfg.Ports.Router),
			"--probe-listen=" + spec.Loopback(e.Cfg.Ports.RouterProbe),
		},
		Ready: func(ctx context.Context) error {
			return proc.HTTPOK(ctx, nil, fmt.Sprintf("http://%s/readyz", spec.Loopback(e.Cfg.Ports.RouterProbe)), "")
		},
	}
}

// ourProcesses are the controller and router as host processes (--host-processes).
var ourProcesses = []Process{
	{Name: "agent-sandbox-controller", When: WithHostProcesses, Build: restartedIfRebuilt(controller), Check: ownReady(controller)},
	{Name: "sandbox-router", When: WithHostProcesses, Build: restartedIfRebuilt(router), Check: ownReady(router)},
}

// installStep applies the CRDs and the cluster's own objects, then runs the controller and
// router as the chart's Deployments or as host processes; Down stops the host processes (the
// Deployments' pods go with drainStep).
type installStep struct {
	env   Env
	comps []proc.Component
	built bool
}

func (*installStep) Name() string { return "agent-sandbox" }

// components are the controller and router as host processes (restarting one whose binary
// was rebuilt), or none when the chart runs them.
func (s *installStep) components() ([]proc.Component, error) {
	if s.built || !s.env.Cfg.HostProcesses {
		return s.comps, nil
	}
	var comps []proc.Component
	for _, p := range ourProcesses {
		comp, err := p.Build(s.env)
		if err != nil {
			return nil, err
		}
		comps = append(comps, comp)
	}
	s.comps, s.built = comps, true
	return s.comps, nil
}

func (s *installStep) Up(ctx context.Context) error {
	ours, err := s.components()
	if err != nil {
		return err
	}
	return installAgentSandbox(ctx, s.env, filepath.Join(s.env.Bins.K8s, "helm"), ours)
}

func (s *installStep) Down(context.Context) error {
	// Our controllers first, so nothing recreates the pods drainStep deletes next.
	return errors.Join(s.env.Proc.Stop("sandbox-router"), s.env.Proc.Stop("agent-sandbox-controller"))
}
