package integration

import (
	"context"
	"strings"
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

func sandboxYAML(specExtra string) string {
	return "apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata: {generateName: s-}\nspec:\n  " + specExtra + "\n  podTemplate:" + validPodTemplate
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

func TestAdmissionRejectsWhatTheAPIForbids(t *testing.T) {
	cases := []struct {
		name      string
		manifest  string
		wantInErr []string // the field and what is wrong with it
	}{
		{"sandbox replicas 2", sandboxYAML(`replicas: 2`), []string{"spec.replicas", "less than or equal to 1"}},
		{"sandbox replicas -1", sandboxYAML(`replicas: -1`), []string{"spec.replicas", "greater than or equal to 0"}},
		{"sandbox bad shutdownPolicy", sandboxYAML(`shutdownPolicy: Explode`), []string{"spec.shutdownPolicy", `"Delete", "Retain"`}},
		{"sandbox bad shutdownTime", sandboxYAML(`shutdownTime: tomorrow`), []string{"spec.shutdownTime", "date-time"}},
		{"sandbox without podTemplate", "apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata: {name: x}\nspec: {replicas: 1}", []string{"spec.podTemplate", "Required"}},
		{"sandbox without spec", "apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata: {name: x}", []string{"spec", "Required"}},
		{"sandbox with an empty pod spec", "apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata: {name: x}\nspec:\n  podTemplate:\n    spec: {}", []string{"spec.podTemplate.spec.containers", "Required"}},
		{"sandbox volume claim template without spec", sandboxYAML("volumeClaimTemplates:\n  - metadata: {name: home}"), []string{"spec.volumeClaimTemplates[0].spec", "Required"}},
		{"claim without template ref", claimYAML(`warmpool: none`), []string{"spec.sandboxTemplateRef", "Required"}},
		{"claim bad shutdownPolicy", claimYAML("sandboxTemplateRef: {name: t}\n  lifecycle: {shutdownPolicy: Never}"), []string{"spec.lifecycle.shutdownPolicy", `"Delete", "DeleteForeground", "Retain"`}},
		{"claim negative ttl", claimYAML("sandboxTemplateRef: {name: t}\n  lifecycle: {ttlSecondsAfterFinished: -1}"), []string{"spec.lifecycle.ttlSecondsAfterFinished", "greater than or equal to 0"}},
		{"claim bad shutdownTime", claimYAML("sandboxTemplateRef: {name: t}\n  lifecycle: {shutdownTime: soon}"), []string{"spec.lifecycle.shutdownTime", "date-time"}},
		{"claim env without value", claimYAML("sandboxTemplateRef: {name: t}\n  env: [{name: A}]"), []string{"spec.env[0].value", "Required"}},
		{"template bad networkPolicyManagement", templateYAML(`networkPolicyManagement: Sometimes`), []string{"spec.networkPolicyManagement", `"Managed", "Unmanaged"`}},
		{"template bad envVarsInjectionPolicy", templateYAML(`envVarsInjectionPolicy: Always`), []string{"spec.envVarsInjectionPolicy", `"Allowed", "Overrides", "Disallowed"`}},
		{"template without podTemplate", "apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxTemplate\nmetadata: {name: x}\nspec: {envVarsInjectionPolicy: Allowed}", []string{"spec.podTemplate", "Required"}},
		{"pool negative replicas", poolYAML("replicas: -1\n  sandboxTemplateRef: {name: t}"), []string{"spec.replicas", "greater than or equal to 0"}},
		{"pool without replicas", poolYAML("sandboxTemplateRef: {name: t}"), []string{"spec.replicas", "Required"}},
		{"pool without template ref", poolYAML("replicas: 1"), []string{"spec.sandboxTemplateRef", "Required"}},
		{"pool bad update strategy", poolYAML("replicas: 1\n  sandboxTemplateRef: {name: t}\n  updateStrategy: {type: Rolling}"), []string{"spec.updateStrategy.type", `"Recreate", "OnReplenish"`}},
	}
	ns := newNamespace(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := createYAML(t, ns, tc.manifest)
			if err == nil {
				t.Fatalf("the API server accepted it, want a rejection naming %v", tc.wantInErr)
			}
			for _, want := range tc.wantInErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

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
