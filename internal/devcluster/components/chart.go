package components

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// The in-cluster install of the local cluster: the controller and router run as the Helm
// chart's Deployments, from images of our freshly built binaries imported into containerd, as
// users run them. The CRDs are applied from the chart's crds/ (Helm installs CRDs only once and
// never upgrades them; we want every `up` to bring them current).

const (
	releaseName = "agent-sandbox"
	// imageAnnotation carries the image ids on the pod templates, so a rebuilt binary rolls
	// its Deployment (the tag stays :dev).
	imageAnnotation = "dev.agents.x-k8s.io/image"
)

// chartValues are the dev cluster's settings on top of the chart's defaults: our images, never
// pulled; the chart's two replicas each (the conversion webhook and the router stay up while one
// restarts, as on a real install) with small requests on 2 cores; the router on a fixed
// NodePort so the host reaches it. Router auth is the chart's default, as in every install:
// the host's clients send the developer's token (writeRouterToken), pods are named by their
// source IP. The controller gives sandbox pods the RuntimeClass of --sandbox-runtime (gvisor,
// or none for runc). Domain allow-lists are not enforced here (egress engine none): this Cilium,
// chained after the bridge, runs with its L7 proxy off, so it would refuse the DNS rule every
// CiliumNetworkPolicy for names needs, and the names would stay closed while the Sandbox
// reported them open (docs/egress.md, "Domains"). The node agent of the memory-keeping pause
// works on the state dir's paths (docs/snapshots.md).
func chartValues(e Env, imageIDs map[string]string) map[string]any {
	component := func(name, repo string) map[string]any {
		return map[string]any{
			"image":          map[string]any{"repository": repo, "tag": "dev", "pullPolicy": "Never"},
			"podAnnotations": map[string]any{imageAnnotation: imageIDs[name]},
			"resources": map[string]any{
				"requests": map[string]any{"cpu": "50m", "memory": "64Mi"},
				"limits":   map[string]any{"memory": "1Gi"},
			},
		}
	}
	ctrl := component("controller", strings.TrimSuffix(spec.ControllerImage, ":dev"))
	ctrl["defaultRuntimeClassName"] = e.Cfg.SandboxRuntimeClass()
	router := component("router", strings.TrimSuffix(spec.RouterImage, ":dev"))
	router["service"] = map[string]any{"type": "NodePort", "nodePort": e.Cfg.Ports.RouterNodePort}
	router["auth"] = map[string]any{"scopedTokenSecret": scopedTokenSecret}
	router["e2b"] = map[string]any{"enabled": true, "nodePort": e.Cfg.Ports.RouterE2BNodePort}
	agent := component("node-agent", strings.TrimSuffix(spec.NodeAgentImage, ":dev"))
	agent["enabled"] = true
	agent["imagesDir"] = nodeAgentImagesDir(e)
	agent["containerdTasksDir"] = containerdTasksDir(e)
	agent["shimRoot"] = e.Cfg.HibernateDir
	return map[string]any{"controller": ctrl, "router": router, "nodeAgent": agent}
}

// scopedTokenSecret signs the tokens scoped to one Sandbox, which E2B's SDK receives as its
// envd access token: the dev cluster serves E2B's SDKs as an install that turns them on does.
const scopedTokenSecret = "router-scoped-token"

// ensureScopedTokenSecret creates the signing Secret once, from 32 random bytes; a later `up`
// keeps it, so tokens handed out stay valid across upgrades.
func ensureScopedTokenSecret(ctx context.Context, cl client.Client) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: spec.SystemNS, Name: scopedTokenSecret},
		StringData: map[string]string{"secret": base64.StdEncoding.EncodeToString(key)},
	}
	if err := cl.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s: %w", scopedTokenSecret, err)
	}
	return nil
}

// installChart imports the controller and router images, installs or upgrades the chart's
// release and waits until both Deployments are available and the CRDs convert through the
// controller's webhook.
func installChart(ctx context.Context, e Env, helm string) error {
	cl, err := kube.Client(e.Cfg.KubeconfigPath())
	if err != nil {
		return err
	}
	// A cluster that ran our controller and router as host processes has their service
	// accounts and roles from config/rbac; Helm refuses to take over objects it did not create.
	if err := removeUnmanaged(ctx, e, cl); err != nil {
		return err
	}
	e.Cfg.Progress("importing images %s, %s and %s into containerd", spec.ControllerImage, spec.RouterImage, spec.NodeAgentImage)
	ids, err := importImageIDs(ctx, e, "controller", "router", "node-agent")
	if err != nil {
		return err
	}
	if err := ensureScopedTokenSecret(ctx, cl); err != nil {
		return err
	}
	values, err := yaml.Marshal(chartValues(e, ids))
	if err != nil {
		return err
	}
	valuesFile := e.Cfg.Path("chart-values.yaml")
	if err := os.WriteFile(valuesFile, values, 0o644); err != nil {
		return err
	}
	e.Cfg.Progress("installing the Helm chart (controller and router as Deployments)")
	cmd := exec.CommandContext(ctx, helm, "upgrade", "--install", releaseName,
		filepath.Join(e.Cfg.RepoRoot, "charts", "agent-sandbox"),
		"--namespace", spec.SystemNS, "--skip-crds", "--values", valuesFile,
		"--kubeconfig", e.Cfg.KubeconfigPath())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm upgrade --install: %w\n%s", err, out)
	}
	for _, name := range []string{"agent-sandbox-controller", "sandbox-router"} {
		if err := e.Proc.WaitUntil(ctx, "Deployment "+name, nil, 3*time.Minute, kube.DeploymentRolledOut(cl, name)); err != nil {
			return err
		}
	}
	if err := e.Proc.WaitUntil(ctx, "DaemonSet agent-sandbox-node-agent", nil, 3*time.Minute, kube.DaemonSetRolledOut(cl, "agent-sandbox-node-agent")); err != nil {
		return err
	}
	// The controller writes its CA into the CRDs once it has its certificate: until then a
	// v1beta1 read fails.
	return e.Proc.WaitUntil(ctx, "the conversion webhook", nil, 2*time.Minute, convertsThroughWebhook(cl))
}

func convertsThroughWebhook(cl client.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(schema.GroupVersionKind{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxTemplateList"})
		return cl.List(ctx, l, client.InNamespace(spec.SystemNS))
	}
}

// removeUnmanaged deletes the objects of config/rbac (and the host-process controller and
// router) that a host-process cluster created, so that Helm can create its own.
func removeUnmanaged(ctx context.Context, e Env, cl client.Client) error {
	for _, name := range []string{"sandbox-router", "agent-sandbox-controller"} {
		if err := e.Proc.Stop(name); err != nil {
			return err
		}
	}
	objs, err := kube.ReadYAMLDir(filepath.Join(e.Cfg.RepoRoot, "config", "rbac"))
	if err != nil {
		return err
	}
	for _, o := range objs {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(o.GroupVersionKind())
		if err := cl.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
			continue
		}
		if cur.GetAnnotations()["meta.helm.sh/release-name"] != "" {
			continue
		}
		if err := client.IgnoreNotFound(cl.Delete(ctx, cur)); err != nil {
			return fmt.Errorf("removing %s %s left by a host-process install: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// uninstallChart removes the release when the cluster switches to host processes.
func uninstallChart(ctx context.Context, e Env, helm string) error {
	status := exec.CommandContext(ctx, helm, "status", releaseName, "--namespace", spec.SystemNS, "--kubeconfig", e.Cfg.KubeconfigPath())
	if status.Run() != nil {
		return nil
	}
	e.Cfg.Progress("uninstalling the Helm release: the controller and router run as host processes")
	cmd := exec.CommandContext(ctx, helm, "uninstall", releaseName, "--namespace", spec.SystemNS, "--wait", "--kubeconfig", e.Cfg.KubeconfigPath())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm uninstall: %w\n%s", err, out)
	}
	return nil
}

// stopInClusterController deletes the controller's pods while kube-controller-manager is
// stopped, so that neither it nor its ReplicaSet recreates pods that teardown deletes next.
func stopInClusterController(ctx context.Context, e Env) error {
	cl, err := kube.Client(e.Cfg.KubeconfigPath())
	if err != nil {
		return err
	}
	sel := client.MatchingLabels{"app": "agent-sandbox-controller"}
	if err := cl.DeleteAllOf(ctx, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}},
		client.InNamespace(spec.SystemNS), sel, client.GracePeriodSeconds(2)); err != nil {
		return err
	}
	return e.Proc.WaitUntil(ctx, "the controller's pods to go", nil, time.Minute, func(ctx context.Context) error {
		l := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
		if err := cl.List(ctx, l, client.InNamespace(spec.SystemNS), sel); err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d left", len(l.Items))
		}
		return nil
	})
}

// The mode and sandbox runtime of the last `up`, so that `status` reports the router where it
// is and the runtime sandboxes get.
func modeFile(e Env) string { return e.Cfg.Path("mode") }

func sandboxRuntimeFile(e Env) string { return e.Cfg.Path("sandbox-runtime") }

func recordMode(e Env) error {
	mode := "chart"
	if e.Cfg.HostProcesses {
		mode = "host-processes"
	}
	if err := os.WriteFile(sandboxRuntimeFile(e), []byte(e.Cfg.SandboxRuntime+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(modeFile(e), []byte(mode+"\n"), 0o644)
}

// recordedSandboxRuntime is the sandbox runtime of the last `up` ("" before the first).
func recordedSandboxRuntime(e Env) string {
	b, err := os.ReadFile(sandboxRuntimeFile(e))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func recordedHostProcesses(e Env) bool {
	b, err := os.ReadFile(modeFile(e))
	return err == nil && strings.TrimSpace(string(b)) == "host-processes"
}
