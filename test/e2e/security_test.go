//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// On a real cluster, no tenant-written metadata puts the router's label on a running sandbox
// pod: claims are refused at admission, templates and raw Sandboxes have it left out.
func TestNoSandboxPodPosesAsTheRouter(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "security")
	ctx := t.Context()

	claim := &extv1alpha1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "impostor"},
		Spec: extv1alpha1.SandboxClaimSpec{TemplateRef: extv1alpha1.SandboxTemplateRef{Name: "router-labelled"},
			AdditionalPodMetadata: agentsv1alpha1.PodMetadata{Labels: map[string]string{"app": "sandbox-router"}}},
	}
	if err := kube.Create(ctx, claim); err == nil || !strings.Contains(err.Error(), "identify the sandbox router") {
		t.Fatalf("a claim asking for the router's label: err = %v, want an admission error", err)
	}

	// The template carries the router's label from its creation (an update racing the claim
	// could let the claim see the older template).
	tmpl := &extv1alpha1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "router-labelled"},
		Spec: extv1alpha1.SandboxTemplateSpec{PodTemplate: agentsv1alpha1.PodTemplate{
			Metadata: agentsv1alpha1.PodMetadata{Labels: map[string]string{"app": "sandbox-router", "team": "a"}},
			Spec:     corev1.PodSpec{Containers: []corev1.Container{runtimeContainer()}, TerminationGracePeriodSeconds: ptr.To[int64](5)},
		}},
	}
	mustf(t, kube.Create(ctx, tmpl), "creating template")
	claim.Spec.AdditionalPodMetadata = agentsv1alpha1.PodMetadata{}
	mustf(t, kube.Create(ctx, claim), "creating claim")
	raw := harnessSandbox(ns, "raw-impostor", nil)
	raw.Spec.PodTemplate.Metadata.Labels["app"] = "sandbox-router"
	mustf(t, kube.Create(ctx, raw), "creating raw sandbox")

	for _, name := range []string{"impostor", "raw-impostor"} {
		pod := waitPodReady(t, ns, name)
		if pod.Labels["app"] == "sandbox-router" {
			t.Errorf("running pod %s carries app=sandbox-router: %v", name, pod.Labels)
		}
	}
	if pod, err := podOf(context.Background(), ns, "impostor"); err != nil || pod.Labels["team"] != "a" {
		t.Errorf("the template's open label team=a is missing: %v %v", err, pod.Labels)
	}
}
