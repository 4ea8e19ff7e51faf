package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

const betaPodTemplate = `
  podTemplate:
    spec:
      containers:
      - name: runtime
        image: runtime:1`

func TestConversionV1beta1AdmissionRejectsWhatItsSchemaForbids(t *testing.T) {
	cases := []struct {
		name     string
		manifest string
		want     string
	}{
		{"Sandbox operatingMode outside its enum",
			"apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {generateName: s-}\nspec:\n  operatingMode: Paused" + betaPodTemplate,
			`spec.operatingMode: Unsupported value: "Paused"`},
		{"Sandbox without podTemplate",
			"apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {generateName: s-}\nspec:\n  service: true",
			`spec.podTemplate: Required value`},
		{"SandboxClaim without warmPoolRef",
			"apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {generateName: c-}\nspec:\n  lifecycle: {shutdownPolicy: Delete}",
			`spec.warmPoolRef: Required value`},
		{"SandboxClaim negative ttlSecondsAfterFinished",
			"apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {generateName: c-}\nspec:\n  warmPoolRef: {name: p}\n  lifecycle: {ttlSecondsAfterFinished: -1}",
			`spec.lifecycle.ttlSecondsAfterFinished: Invalid value: -1`},
		{"SandboxTemplate volumeClaimTemplatesPolicy outside its enum",
			"apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata: {generateName: t-}\nspec:\n  volumeClaimTemplatesPolicy: Sometimes" + betaPodTemplate,
			`spec.volumeClaimTemplatesPolicy: Unsupported value: "Sometimes"`},
		{"SandboxWarmPool negative replicas",
			"apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {generateName: p-}\nspec:\n  replicas: -1\n  sandboxTemplateRef: {name: t}",
			`spec.replicas: Invalid value: -1`},
	}
	ns := newNamespace(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := createYAML(t, ns, tc.manifest)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want Invalid with %q", err, tc.want)
			}
		})
	}
}

func TestConversionV1beta1SandboxVolumeClaimTemplatesAreImmutable(t *testing.T) {
	ns := newNamespace(t)
	sb := testwrap.MakeSandboxV1beta1(ns, "immutable").VolumeClaimTemplates(agentsv1beta1.PersistentVolumeClaimTemplate{
		EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "home"},
	}).Obj()
	mustCreateObj(t, sb)
	sb.Spec.VolumeClaimTemplates[0].Name = "work"
	err := k8s.Update(context.Background(), sb)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "volumeClaimTemplates is immutable") {
		t.Fatalf("update error = %v, want Invalid: volumeClaimTemplates is immutable", err)
	}
}

// TestConversionWebhookDownLosesNothing points one CRD's conversion at a port nobody listens on:
// v1alpha1 requests fail with the API server's clear error, v1beta1 (storage, what the
// controllers speak) keeps working, a failed v1alpha1 create leaves nothing behind, and
// everything is there again once it is back.
func TestConversionWebhookDownLosesNothing(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "before").Obj())
	getAlpha := func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "before"}, &extv1alpha1.SandboxTemplate{})
	}
	restore := breakConversion(t, "sandboxtemplates.extensions.agents.x-k8s.io", getAlpha)

	err := getAlpha()
	if err == nil || !strings.Contains(err.Error(), "conversion webhook for extensions.agents.x-k8s.io") {
		t.Errorf("v1alpha1 get with the webhook down: error = %v, want the API server's conversion webhook error", err)
	}
	during := testwrap.MakeTemplate(ns, "during").Obj()
	if err := k8s.Create(context.Background(), during); err == nil {
		t.Errorf("v1alpha1 create with the webhook down succeeded, want an error")
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "before"}, &extv1beta1.SandboxTemplate{}); err != nil {
		t.Errorf("v1beta1 get with the webhook down: %v, want the stored object", err)
	}
	testwrap.Eventually(t, "the failed v1alpha1 create left nothing", exists(&extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "during"}}, false))

	restore()
	got := &extv1alpha1.SandboxTemplate{}
	testwrap.Eventually(t, "v1alpha1 get once the webhook is back", func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "before"}, got)
	})
	if got.Spec.PodTemplate.Spec.Containers[0].Image != "sandbox-runtime:test" {
		t.Errorf("template after the outage = %+v", got.Spec.PodTemplate.Spec)
	}
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// breakConversion points the CRD's conversion webhook at a closed port, waits until probe fails,
// and returns a func that puts the original URL back (also run at cleanup).
func breakConversion(t *testing.T, name string, probe func() error) func() {
	t.Helper()
	ctx := context.Background()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	url, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "url")
	if url == "" {
		t.Fatalf("CRD %s has no conversion webhook URL", name)
	}
	setURL := func(u string) error {
		patch := []byte(`{"spec":{"conversion":{"webhook":{"clientConfig":{"url":"` + u + `"}}}}}`)
		return k8s.Patch(ctx, crd, client.RawPatch("application/merge-patch+json", patch))
	}
	if err := setURL("https://127.0.0.1:1/convert"); err != nil {
		t.Fatal(err)
	}
	var restored bool
	restore := func() {
		if !restored {
			restored = true
			if err := setURL(url); err != nil {
				t.Errorf("restoring the conversion webhook of %s: %v", name, err)
			}
		}
	}
	t.Cleanup(restore)
	// The API server picks up a CRD change asynchronously.
	testwrap.Eventually(t, "conversion broken", func() error {
		if probe() != nil {
			return nil
		}
		return errors.New("v1beta1 still served")
	})
	return restore
}
