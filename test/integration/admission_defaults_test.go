package integration

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// createYAML sends a manifest as a user would (server-side dry run, nothing is stored).
func createYAML(t *testing.T, ns, manifest string) (*unstructured.Unstructured, error) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatalf("bad test manifest: %v", err)
	}
	obj.SetNamespace(ns)
	err := k8s.Create(context.Background(), obj, client.DryRunAll)
	return obj, err
}

func mustCreate(t *testing.T, ns, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj, err := createYAML(t, ns, manifest)
	if err != nil {
		t.Fatalf("creating a valid manifest failed: %v", err)
	}
	return obj
}

func decodeInto(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		t.Fatalf("decoding %s: %v", obj.GetKind(), err)
	}
}

func templateYAML(specExtra string) string {
	return "apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxTemplate\nmetadata: {generateName: t-}\nspec:\n  " + specExtra + "\n  podTemplate:" + validPodTemplate
}

func claimYAML(spec string) string {
	return "apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxClaim\nmetadata: {generateName: c-}\nspec:\n  " + spec
}

func poolYAML(spec string) string {
	return "apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxWarmPool\nmetadata: {generateName: p-}\nspec:\n  " + spec
}

const validPodTemplate = `
    spec:
      containers:
      - name: runtime
        image: runtime:1`

// The rejections (invalid manifests of every kind) are the corpus in testdata/badinput, run by
// TestBadInputManifests in badinput_test.go.

func TestAdmissionAppliesTheDocumentedDefaults(t *testing.T) {
	ns := newNamespace(t)
	sb := &agentsv1alpha1.Sandbox{}
	decodeInto(t, mustCreate(t, ns, "apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata: {name: defaults}\nspec:\n  podTemplate:"+validPodTemplate), sb)
	if sb.Spec.Replicas == nil || *sb.Spec.Replicas != 1 {
		t.Errorf("sandbox spec.replicas = %v, want default 1", sb.Spec.Replicas)
	}
	if sb.Spec.ShutdownPolicy == nil || *sb.Spec.ShutdownPolicy != agentsv1alpha1.ShutdownPolicyRetain {
		t.Errorf("sandbox spec.shutdownPolicy = %v, want default Retain", sb.Spec.ShutdownPolicy)
	}

	tmpl := &extensionsv1alpha1.SandboxTemplate{}
	decodeInto(t, mustCreate(t, ns, templateYAML("")), tmpl)
	if tmpl.Spec.NetworkPolicyManagement != extensionsv1alpha1.NetworkPolicyManagementManaged {
		t.Errorf("template networkPolicyManagement = %q, want default Managed", tmpl.Spec.NetworkPolicyManagement)
	}
	if tmpl.Spec.EnvVarsInjectionPolicy != extensionsv1alpha1.EnvVarsInjectionPolicyDisallowed {
		t.Errorf("template envVarsInjectionPolicy = %q, want default Disallowed", tmpl.Spec.EnvVarsInjectionPolicy)
	}

	claim := &extensionsv1alpha1.SandboxClaim{}
	decodeInto(t, mustCreate(t, ns, claimYAML("sandboxTemplateRef: {name: t}\n  lifecycle: {ttlSecondsAfterFinished: 0}")), claim)
	if claim.Spec.WarmPool == nil || *claim.Spec.WarmPool != extensionsv1alpha1.WarmPoolPolicyDefault {
		t.Errorf("claim warmpool = %v, want default %q", claim.Spec.WarmPool, extensionsv1alpha1.WarmPoolPolicyDefault)
	}
	if claim.Spec.Lifecycle == nil || claim.Spec.Lifecycle.ShutdownPolicy != extensionsv1alpha1.ShutdownPolicyRetain {
		t.Errorf("claim lifecycle = %+v, want shutdownPolicy default Retain", claim.Spec.Lifecycle)
	}

	pool := &extensionsv1alpha1.SandboxWarmPool{}
	decodeInto(t, mustCreate(t, ns, poolYAML("replicas: 0\n  sandboxTemplateRef: {name: t}\n  updateStrategy: {}")), pool)
	if pool.Spec.UpdateStrategy.Type != extensionsv1alpha1.OnReplenishSandboxWarmPoolUpdateStrategyType {
		t.Errorf("pool updateStrategy.type = %q, want default OnReplenish", pool.Spec.UpdateStrategy.Type)
	}
}
