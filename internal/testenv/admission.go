package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The ValidatingAdmissionPolicies of config/admission (and their bindings) are installed into
// every control plane, as the install ships them, so that tests see what a tenant sees.

// admissionProbeUser may create Sandboxes and has none of the rights the policies ask for: its
// dry-run creates show when each binding is enforced.
const admissionProbeUser = "testenv:admission-probe"

// admissionWait bounds the wait for the policies to be enforced (usually well under a second).
const admissionWait = 30 * time.Second

// admissionProbes are, per policy, a Sandbox that policy alone refuses.
var admissionProbes = map[string]func(sb *unstructured.Unstructured){
	"agent-sandbox-network": func(sb *unstructured.Unstructured) {
		sb.SetAnnotations(map[string]string{"agents.x-k8s.io/egress": "allow-all"})
	},
	"agent-sandbox-ownership": func(sb *unstructured.Unstructured) {
		sb.SetLabels(map[string]string{"agents.x-k8s.io/claim-uid": "probe"})
	},
	"agent-sandbox-host-access": func(sb *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(sb.Object, true, "spec", "podTemplate", "spec", "hostNetwork")
	},
	"agent-sandbox-pod-security": func(sb *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(sb.Object, "probe", "spec", "podTemplate", "spec", "runtimeClassName")
		_ = unstructured.SetNestedField(sb.Object, int64(0), "spec", "podTemplate", "spec", "securityContext", "runAsUser")
	},
	"agent-sandbox-references": func(sb *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(sb.Object, []any{map[string]any{"name": "s", "secret": map[string]any{"secretName": "probe"}}},
			"spec", "podTemplate", "spec", "volumes")
	},
	"agent-sandbox-size": func(sb *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(sb.Object, []any{map[string]any{"name": "probe", "image": strings.Repeat("x", 300<<10)}},
			"spec", "podTemplate", "spec", "containers")
	},
	// agent-sandbox-frozen judges only updates of claimed and pooled Sandboxes; it is created
	// with the others and enforced from the same moment.
}

// admissionTemplateProbes are, per policy, a SandboxTemplate that policy alone refuses (for
// policies whose Sandbox probe another policy would refuse first).
var admissionTemplateProbes = map[string]func(tmpl *unstructured.Unstructured){
	"agent-sandbox-egress-domains": func(tmpl *unstructured.Unstructured) {
		tmpl.SetAnnotations(map[string]string{"agents.x-k8s.io/egress-domains": "*"})
	},
}

// admissionPolicyFiles are the manifests of config/admission (policies and bindings).
func admissionPolicyFiles() ([]string, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "admission", "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no admission policies in config/admission")
	}
	return out, nil
}

// installAdmissionPolicies creates the policies and bindings of config/admission and waits until
// the API server enforces every one of them.
func (e *Env) installAdmissionPolicies() error {
	ctx := context.Background()
	files, err := admissionPolicyFiles()
	if err != nil {
		return err
	}
	for _, f := range files {
		objs, err := decodeManifests(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			// Strict: a field the API server does not know would be dropped, not enforced.
			if err := e.Client.Create(ctx, o, client.FieldValidation("Strict")); err != nil {
				return fmt.Errorf("creating %s %s from %s: %w", o.GetKind(), o.GetName(), f, err)
			}
		}
	}
	return e.waitForAdmissionPolicies(ctx)
}

func decodeManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// waitForAdmissionPolicies sends each policy's probe as a user allowed to create Sandboxes
// (dry run, in namespace default) until that policy refuses it.
func (e *Env) waitForAdmissionPolicies(ctx context.Context) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "testenv-admission-probe"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes"}, Verbs: []string{"create"}},
			{APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxtemplates"}, Verbs: []string{"create"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "testenv-admission-probe"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: admissionProbeUser}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := e.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the admission probe's %T: %w", o, err)
		}
	}
	defer func() {
		_ = e.Client.Delete(ctx, binding)
		_ = e.Client.Delete(ctx, role)
	}()
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: admissionProbeUser}
	probe, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(admissionWait)
	for policy, mutate := range admissionProbes {
		if err := waitUntilRefused(ctx, probe, policy, probeSandbox(mutate), deadline); err != nil {
			return err
		}
	}
	for policy, mutate := range admissionTemplateProbes {
		if err := waitUntilRefused(ctx, probe, policy, probeTemplate(mutate), deadline); err != nil {
			return err
		}
	}
	return nil
}

// waitUntilRefused dry-runs the creation of obj until policy refuses it.
func waitUntilRefused(ctx context.Context, probe client.Client, policy string, obj *unstructured.Unstructured, deadline time.Time) error {
	for {
		err := probe.Create(ctx, obj.DeepCopy(), client.DryRunAll)
		if (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ValidatingAdmissionPolicy %s is not enforced after %s: its probe got %v", policy, admissionWait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func probeSandbox(mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
	sb := &unstructured.Unstructured{Object: map[string]any{
		// The storage version: the probe runs before any conversion webhook serves.
		"apiVersion": "agents.x-k8s.io/v1beta1",
		"kind":       "Sandbox",
		"metadata":   map[string]any{"namespace": "default", "name": "admission-probe"},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "probe", "image": "probe"}},
		}}},
	}}
	mutate(sb)
	return sb
}

func probeTemplate(mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1",
		"kind":       "SandboxTemplate",
		"metadata":   map[string]any{"namespace": "default", "name": "admission-probe"},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "probe", "image": "probe"}},
		}}},
	}}
	mutate(tmpl)
	return tmpl
}
