package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/manager"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// oldCRDs are the CRDs of the last release that stored v1alpha1 (commit 1e20cba's
// config/crd/bases).
const oldCRDs = "testdata/crds-v1alpha1-storage"

const migrationNS = "upgraded"

// TestStorageMigrationFromV1alpha1 upgrades an install in place, on its own API server: objects
// of every kind are written while the CRDs store v1alpha1 (as an earlier install, including the
// conversion annotations its webhook left on objects written in v1beta1), then the current CRDs
// are applied and the current controller started. Every object still reads in both versions
// with nothing lost, the controller reconciles them, and the migration (read each object and
// write it back in v1beta1, then drop v1alpha1 from status.storedVersions) leaves nothing stored
// in v1alpha1: with the webhook gone, every object still reads in v1beta1.
func TestStorageMigrationFromV1alpha1(t *testing.T) {
	old, err := testenv.Start(testenv.Options{ConversionWebhook: true, CRDDir: oldCRDs, NoAdmissionPolicies: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Stop() })
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(old.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: migrationNS}}); err != nil {
		t.Fatal(err)
	}
	written := writeV1alpha1Install(t, c)

	applyCurrentCRDs(t, c)
	startManagerOn(t, old, manager.Options{})
	for _, obj := range written {
		readsInBothVersions(t, c, obj)
	}
	controllerReconcilesUpgraded(t, c)

	migrateStorage(t, c)
	breakConversionOf(t, c)
	for _, list := range []client.ObjectList{&agentsv1beta1.SandboxList{}, &extv1beta1.SandboxClaimList{},
		&extv1beta1.SandboxTemplateList{}, &extv1beta1.SandboxWarmPoolList{}} {
		if err := c.List(context.Background(), list, client.InNamespace(migrationNS)); err != nil {
			t.Errorf("listing %T in v1beta1 without a conversion webhook after the migration: %v (an object is still stored in v1alpha1)", list, err)
		}
	}
}

// writeV1alpha1Install writes, in v1alpha1 while v1alpha1 is stored, what an install of the
// previous release holds, and returns the objects as written.
func writeV1alpha1Install(t *testing.T, c client.Client) []client.Object {
	t.Helper()
	betaVCT := `{"volumeClaimTemplates":[{"metadata":{"name":"scratch"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"2Gi"}}}}]}`
	objs := []client.Object{
		testwrap.MakeTemplate(migrationNS, "python").Obj(),
		// A template written in v1beta1 then: its v1beta1-only setting in the annotation.
		testwrap.MakeTemplate(migrationNS, "vols").Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home").
			Annotation(extv1alpha1.SandboxTemplateConversionAnnotation, `{"volumeClaimTemplatesPolicy":"Allowed"}`).Obj(),
		testwrap.MakeWarmPool(migrationNS, "python-pool").Template("python").Replicas(1).Obj(),
		testwrap.MakeWarmPool(migrationNS, "vols-pool").Template("vols").Replicas(0).Obj(),
		testwrap.MakeSandbox(migrationNS, "paused").Replicas(0).
			Annotation(agentsv1alpha1.SandboxConversionAnnotation, `{"service":false}`).Obj(),
		testwrap.MakeClaim(migrationNS, "fresh").Template("python").WarmPool("none").Obj(),
		testwrap.MakeClaim(migrationNS, "named").Template("python").WarmPool("python-pool").Obj(),
		// A claim written in v1beta1 then: a pool only, and its own volumes in the annotation.
		testwrap.MakeClaim(migrationNS, "beta").WarmPool("vols-pool").
			Annotation(extv1alpha1.SandboxClaimConversionAnnotation, betaVCT).Obj(),
	}
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("writing %T %s while v1alpha1 is stored: %v", o, o.GetName(), err)
		}
	}
	return objs
}

// applyCurrentCRDs replaces the CRDs' versions with config/crd/bases', keeping the conversion
// webhook the harness configured, as `kubectl apply` of the chart's CRDs does.
func applyCurrentCRDs(t *testing.T, c client.Client) {
	t.Helper()
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) != 4 {
		t.Fatalf("current CRDs: %v %v", files, err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		current := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, current); err != nil {
			t.Fatal(err)
		}
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: current.Name}, live); err != nil {
			t.Fatal(err)
		}
		live.Spec.Versions = current.Spec.Versions
		if err := c.Update(context.Background(), live); err != nil {
			t.Fatalf("applying the current CRD %s: %v", current.Name, err)
		}
	}
}

// startManagerOn runs the current controller (and its webhook) with opts against a control
// plane of the test's own until the test ends.
func startManagerOn(t *testing.T, env *testenv.Env, opts manager.Options) {
	t.Helper()
	opts.SkipNameValidation, opts.Webhook = true, env.WebhookOptions()
	mgr, err := manager.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	if err := env.WaitForWebhook(time.Minute); err != nil {
		t.Fatal(err)
	}
}

// readsInBothVersions checks that obj, as written in v1alpha1, reads back exactly in v1alpha1
// (spec and annotations) and reads in v1beta1 (the other version) at all.
func readsInBothVersions(t *testing.T, c client.Client, written client.Object) {
	t.Helper()
	key := client.ObjectKeyFromObject(written)
	alpha := written.DeepCopyObject().(client.Object)
	testwrap.Eventually(t, fmt.Sprintf("%T %s reads in v1alpha1 after the upgrade", written, key.Name), func() error {
		return c.Get(context.Background(), key, alpha)
	})
	if d := specAndAnnotationsDiff(written, alpha); d != "" {
		t.Errorf("%T %s read in v1alpha1 after the upgrade differs from what was written: %s", written, key.Name, d)
	}
	beta, err := c.Scheme().New(extv1beta1.GroupVersion.WithKind(kindOf(t, c, written)))
	if err != nil {
		beta, err = c.Scheme().New(agentsv1beta1.GroupVersion.WithKind(kindOf(t, c, written)))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), key, beta.(client.Object)); err != nil {
		t.Errorf("%T %s in v1beta1 after the upgrade: %v", written, key.Name, err)
	}
}

func kindOf(t *testing.T, c client.Client, o runtime.Object) string {
	t.Helper()
	gvks, _, err := c.Scheme().ObjectKinds(o)
	if err != nil {
		t.Fatal(err)
	}
	return gvks[0].Kind
}
