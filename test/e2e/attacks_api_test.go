//go:build e2e

package e2e

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// Issue 36's attacks that need a node (docs/security.md, "A Sandbox grants no more than its
// author holds"), made as a tenant on the local cluster; the admission rules themselves are
// proven on the real API server by test/integration/admission_grants_test.go.
func TestAPISandboxAttacksOnTheNode(t *testing.T) {
	ns := newNamespace(t, "tenant-api")
	ctx := t.Context()
	a := tenant(t, ns)
	// The agent harness's raw Sandbox, as root (its own image runs as root).
	mustf(t, a.Create(ctx, harnessSandbox(ns, "root", nil).Obj()), "tenant: creating a raw root sandbox")
	podIPs(t, ns, "root")

	t.Run("a raw root sandbox holds no capabilities and cannot make a device node", func(t *testing.T) {
		out, _ := execOut(t, ns, "root", "id -u; grep CapEff /proc/self/status; "+
			"if mknod /tmp/mem c 1 3 2>/dev/null; then echo made; else echo refused; fi")
		lines := strings.Fields(out)
		if len(lines) < 4 || lines[0] != "0" || lines[2] != "0000000000000000" || lines[3] != "refused" {
			t.Errorf("uid, CapEff, mknod: %q, want root with CapEff 0000000000000000 and mknod refused", out)
		}
	})

	t.Run("a raw sandbox runs on the installation's default runtime class", func(t *testing.T) {
		pod, err := podOf(ctx, ns, "root")
		mustf(t, err, "reading the pod")
		// The local cluster's default is gvisor unless it was brought up on runc (no class).
		want := spec.SandboxRuntimeGVisor
		if os.Getenv(spec.SandboxRuntimeEnv) == spec.SandboxRuntimeRunc {
			want = ""
		}
		if got := ptr.Deref(pod.Spec.RuntimeClassName, ""); got != want {
			t.Errorf("raw sandbox pod runtimeClassName %q, want the default %q", got, want)
		}
	})

	t.Run("root on the node's kernel is refused", func(t *testing.T) {
		sb := harnessSandbox(ns, "root-runc", nil).Obj()
		sb.Spec.PodTemplate.Spec.RuntimeClassName = ptr.To("runc")
		refusedWith(t, "tenant creating a root sandbox on runc", a.Create(ctx, sb), "agent-sandbox-pod-security", "agents.x-k8s.io/pod-security=baseline")
	})

	t.Run("the conversion webhook is closed to pods; the API server still converts", func(t *testing.T) {
		// A pod without a NetworkPolicy of its own, so that only the webhook's policy can stop it
		// (a raw gVisor sandbox's connections to the system's Services timed out on this cluster
		// whatever the port, which would prove nothing).
		mustf(t, kube.Create(ctx, clientPod(ns, "plain", "default")), "creating a plain pod")
		waitPodReady(t, ns, "plain")
		pods := &corev1.PodList{}
		mustf(t, kube.List(ctx, pods, client.InNamespace("agent-sandbox-system"), client.MatchingLabels{"app": "agent-sandbox-controller"}), "listing controller pods")
		if len(pods.Items) == 0 {
			t.Fatal("no controller pod")
		}
		expectReach(t, ns, "plain", "the conversion webhook", pods.Items[0].Status.PodIP, 9443, false)
		expectReach(t, ns, "plain", "the controller's metrics port (the policy leaves it open)", pods.Items[0].Status.PodIP, 8080, true)
		beta := &unstructured.Unstructured{}
		beta.SetAPIVersion("agents.x-k8s.io/v1beta1")
		beta.SetKind("Sandbox")
		mustf(t, a.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root"}, beta), "tenant reading its sandbox in v1beta1 (converted by the webhook)")
	})
}
