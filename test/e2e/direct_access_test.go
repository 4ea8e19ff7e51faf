//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The claim-per-conversation flow's direct mode (docs/integrations.md) under an enforcing CNI: the integrator's server pods (app=ax-server in
// namespace agent-platform) reach a claimed sandbox at podIP:8494 through the template of
// config/samples/sandboxtemplate-direct-access.yaml, exactly as shipped; any other pod, and the
// server on any other port, cannot.
func TestPlatformPodsReachADirectAccessSandboxAndNoOneElseDoes(t *testing.T) {
	ctx := t.Context()
	platform := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agent-platform"}}
	// The sample's fixed name: one left by an interrupted run may still be terminating.
	slow.EventuallyContext(t, "namespace agent-platform (the sample's) created", func(ctx context.Context) error {
		return kube.Create(ctx, platform.DeepCopy())
	})
	t.Cleanup(func() { _ = kube.Delete(context.Background(), platform) })
	ns := newNamespace(t, "conversation-direct")

	raw, err := os.ReadFile("../../config/samples/sandboxtemplate-direct-access.yaml")
	mustf(t, err, "reading the sample")
	tmpl := &extv1alpha1.SandboxTemplate{}
	mustf(t, yaml.UnmarshalStrict(raw, tmpl), "decoding the sample")
	tmpl.Namespace = ns
	tmpl.Spec.PodTemplate.Spec.Containers[0].Image = spec.RuntimeImage
	tmpl.Spec.PodTemplate.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	mustf(t, kube.Create(ctx, tmpl), "creating the sample template")
	mustf(t, kube.Create(ctx, testwrap.MakeClaim(ns, "conversation").Template(tmpl.Name).Obj()), "creating the claim")

	mustf(t, kube.Create(ctx, harnessSandbox(platform.Name, "ax-server", nil).PodLabel("app", "ax-server").Obj()), "creating the server pod")
	mustf(t, kube.Create(ctx, harnessSandbox(platform.Name, "other", nil).Obj()), "creating another pod of the platform")
	mustf(t, kube.Create(ctx, harnessSandbox(ns, "neighbour", nil).Obj()), "creating a pod beside the sandbox")
	podIPs(t, platform.Name, "ax-server", "other")
	podIPs(t, ns, "neighbour")
	agent := waitPodReady(t, ns, "conversation")

	// The agent's own protocol on 8494: a listener that answers every connection.
	inAgent := func(ctx context.Context, script string) (string, error) {
		var out, errOut bytes.Buffer
		err := kubeExec(ctx, ns, "conversation", "agent", []string{"sh", "-c", script}, &out, &errOut)
		return out.String(), err
	}
	_, err = inAgent(ctx, `setsid sh -c 'while true; do echo axp | nc -l -p 8494; done' >/dev/null 2>&1 &`)
	mustf(t, err, "starting the agent's listener")
	slow.EventuallyContext(t, "the agent listening on 8494", func(ctx context.Context) error {
		out, err := inAgent(ctx, "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null")
		if err != nil || !strings.Contains(strings.ToUpper(out), ":212E") { // 8494 in hex
			return fmt.Errorf("no listener on 8494 (%v): %s", err, out)
		}
		return nil
	})

	ip := agent.Status.PodIP
	expectReach(t, platform.Name, "ax-server", "the agent's port", ip, 8494, true)
	expectReach(t, platform.Name, "ax-server", "sandboxd (not in the sample's rule)", ip, 8888, false)
	expectReach(t, platform.Name, "other", "the agent's port from an unlabelled platform pod", ip, 8494, false)
	expectReach(t, ns, "neighbour", "the agent's port from the sandbox's own namespace", ip, 8494, false)
}
