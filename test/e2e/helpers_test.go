//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// waitLimit bounds every wait; it is a failure bound, never an assertion on speed.
const waitLimit = 3 * time.Minute

// newNamespace gives a test its own namespace, deleted (cascading to everything in it) after.
func newNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(5)}}
	if err := kube.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), ns) })
	return ns.Name
}

// slow is how the tests wait on the cluster: pods really start here.
var slow = testwrap.Wait{Timeout: waitLimit, Interval: 200 * time.Millisecond}

// gone checks that obj no longer exists.
func gone(ctx context.Context, obj client.Object) error {
	err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err == nil:
		return fmt.Errorf("%T %s still exists", obj, obj.GetName())
	}
	return err
}

// runtimeContainer is the sandbox runtime image with sandboxd, probed on its health endpoint.
func runtimeContainer() corev1.Container {
	return corev1.Container{
		Name:            "runtime",
		Image:           spec.RuntimeImage,
		ImagePullPolicy: corev1.PullNever,
		Ports:           []corev1.ContainerPort{{Name: "sandboxd", ContainerPort: 8888}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8888)}},
			PeriodSeconds: 1, TimeoutSeconds: 5, // generous: a busy 2-core machine answers slowly
		},
	}
}

// localVolume is a volume claim template on the local cluster's storage class.
func localVolume(name, size string) agentsv1alpha1.PersistentVolumeClaimTemplate {
	return testwrap.MakeVolumeClaim(name, size).StorageClass(spec.StorageClass).Obj()
}

// createTemplate applies a SandboxTemplate running the runtime image; withHome adds a 1Gi PVC
// mounted at /workspace/home.
func createTemplate(t testing.TB, ns, name string, withHome bool) *extv1alpha1.SandboxTemplate {
	t.Helper()
	return applyTemplate(t, templateFor(ns, name, withHome))
}

// templateFor is createTemplate's template, for a test to change before applying it.
func templateFor(ns, name string, withHome bool) *testwrap.TemplateWrapper {
	w := testwrap.MakeTemplate(ns, name).Containers(runtimeContainer()).TerminationGracePeriod(5)
	if withHome {
		w.Volume(localVolume("home", "1Gi"), "/workspace/home")
	}
	return w
}

func applyTemplate(t testing.TB, w *testwrap.TemplateWrapper) *extv1alpha1.SandboxTemplate {
	t.Helper()
	tmpl := w.Obj()
	if err := kube.Create(t.Context(), tmpl); err != nil {
		t.Fatalf("creating template: %v", err)
	}
	return tmpl
}

func createPool(t testing.TB, ns, name, template string, replicas int32) *extv1alpha1.SandboxWarmPool {
	t.Helper()
	pool := testwrap.MakeWarmPool(ns, name).Template(template).Replicas(replicas).Obj()
	if err := kube.Create(t.Context(), pool); err != nil {
		t.Fatalf("creating warm pool: %v", err)
	}
	waitPoolReady(t, pool)
	return pool
}

func waitPoolReady(t testing.TB, pool *extv1alpha1.SandboxWarmPool) {
	t.Helper()
	slow.EventuallyContext(t, "warm pool "+pool.Name+" ready", func(ctx context.Context) error {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return err
		}
		if pool.Status.ReadyReplicas != pool.Spec.Replicas {
			return fmt.Errorf("%d of %d ready", pool.Status.ReadyReplicas, pool.Spec.Replicas)
		}
		return nil
	})
}

// sdkClient is an SDK client for a namespace that reaches sandboxes through the router, with
// the developer's token (the host is no pod the router could name).
func sdkClient(t testing.TB, ns string) *sdk.Client {
	t.Helper()
	cli, err := sdk.New(sdk.Options{Kubeconfig: cluster.Kubeconfig, Namespace: ns, RouterURL: cluster.RouterURL,
		RouterToken: cluster.RouterToken, Mode: sdk.ModeRouter})
	if err != nil {
		t.Fatalf("sdk client: %v", err)
	}
	t.Cleanup(cli.Close)
	return cli
}

// podOf returns the running pod of a Sandbox (the controller names it after the Sandbox).
func podOf(ctx context.Context, ns, sandbox string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	return pod, kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandbox}, pod)
}

func sandboxReady(sb *agentsv1alpha1.Sandbox) bool {
	return meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady) && len(sb.Status.PodIPs) > 0
}

// kubeExec runs argv in a pod's container through the Kubernetes exec API over WebSocket (what
// @kubernetes/client-node does), streaming stdout and stderr into separate writers.
func kubeExec(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error {
	req := kcs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdout: true, Stderr: true}, clientgoscheme.ParameterCodec)
	exec, err := remotecommand.NewWebSocketExecutor(restCfg, http.MethodGet, req.URL().String())
	if err != nil {
		return err
	}
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}

// execOut is kubeExec collecting the output.
func execOut(t *testing.T, ns, pod, script string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := kubeExec(t.Context(), ns, pod, "runtime", []string{"sh", "-c", script}, &out, &errOut); err != nil {
		t.Fatalf("exec %q in %s: %v (stderr %q)", script, pod, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// routerPost sends a request to the router for a sandbox, the way the agent server's Python SDK does,
// with the developer's token.
func routerPost(ctx context.Context, ns, sandbox, path, body string) (int, string, error) {
	return routerPostAs(ctx, cluster.RouterToken, ns, sandbox, path, body)
}

// routerPostAs is routerPost with another caller's token.
func routerPostAs(ctx context.Context, token, ns, sandbox, path, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cluster.RouterURL+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Sandbox-ID", sandbox)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", "8888")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func mustf(t testing.TB, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}
