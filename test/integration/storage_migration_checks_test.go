package integration

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// migratedCRDs are the CRDs the storage migration rewrites.
var migratedCRDs = []string{"sandboxes.agents.x-k8s.io", "sandboxclaims.extensions.agents.x-k8s.io",
	"sandboxtemplates.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io"}

// specAndAnnotationsDiff compares what a client wrote and what it reads: spec (the field of that
// name), and every annotation written (the controller may add its own).
func specAndAnnotationsDiff(written, read client.Object) string {
	spec := func(o client.Object) any { return reflect.ValueOf(o).Elem().FieldByName("Spec").Interface() }
	if !apiequality.Semantic.DeepEqual(spec(written), spec(read)) {
		return cmp.Diff(spec(written), spec(read))
	}
	for k, v := range written.GetAnnotations() {
		if got, ok := read.GetAnnotations()[k]; !ok || got != v {
			return fmt.Sprintf("annotation %s = %q, written %q", k, got, v)
		}
	}
	return ""
}

// controllerReconcilesUpgraded: the current controller acts on what the previous release
// stored, read through the stored v1alpha1 state (warmpool none, a pool named without a
// template, a v1beta1 claim's own volumes, a paused Sandbox).
func controllerReconcilesUpgraded(t testing.TB, c client.Client) {
	ctx := context.Background()
	testwrap.Eventually(t, "the pool has its member", func() error {
		pool := &extv1beta1.SandboxWarmPool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: migrationNS, Name: "python-pool"}, pool); err != nil {
			return err
		}
		if pool.Status.ObservedGeneration != pool.Generation || pool.Status.Replicas != 1 || len(pool.Status.Conditions) == 0 {
			return fmt.Errorf("pool status %+v", pool.Status)
		}
		return nil
	})
	for _, name := range []string{"fresh", "beta"} { // no ready member (no kubelet): both start cold
		testwrap.Eventually(t, "claim "+name+" has its own Sandbox", func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: migrationNS, Name: name}, &agentsv1beta1.Sandbox{})
		})
	}
	cold := &agentsv1beta1.Sandbox{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: migrationNS, Name: "beta"}, cold); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range cold.Spec.VolumeClaimTemplates {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"home", "scratch"}) {
		t.Errorf("the v1beta1 claim's Sandbox has volume claim templates %v, want the template's home and its own scratch", names)
	}
	testwrap.Eventually(t, "the paused Sandbox reports SandboxPaused", func() error {
		sb := &agentsv1alpha1.Sandbox{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: migrationNS, Name: "paused"}, sb); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady); cond == nil || cond.Reason != agentsv1alpha1.ReasonPaused {
			return fmt.Errorf("Ready condition %+v", cond)
		}
		return nil
	})
}

// migrateStorage is the documented migration: read every object and write it back in v1beta1
// (the API server stores what it writes in the storage version), then record that nothing is
// stored in v1alpha1 any more.
func migrateStorage(t testing.TB, c client.Client) {
	ctx := context.Background()
	lists := []client.ObjectList{&agentsv1beta1.SandboxList{}, &extv1beta1.SandboxClaimList{},
		&extv1beta1.SandboxTemplateList{}, &extv1beta1.SandboxWarmPoolList{}}
	for _, list := range lists {
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			o := item.(client.Object)
			// The controller writes too (status): on a conflict, read again and write back, as
			// any migration tool must.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
					return err
				}
				return c.Update(ctx, o)
			})
			if err != nil {
				t.Fatalf("writing %T %s back: %v", o, o.GetName(), err)
			}
		}
	}
	for _, name := range migratedCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		crd.Status.StoredVersions = []string{"v1beta1"}
		if err := c.Status().Update(ctx, crd); err != nil {
			t.Fatalf("dropping v1alpha1 from %s status.storedVersions: %v", name, err)
		}
	}
}

// breakConversionOf points every CRD's conversion webhook at a closed port: from then on only
// objects stored in v1beta1 read in v1beta1.
func breakConversionOf(t testing.TB, c client.Client) {
	ctx := context.Background()
	for _, name := range migratedCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		url := "https://127.0.0.1:1/convert"
		crd.Spec.Conversion.Webhook.ClientConfig.URL = &url
		crd.Spec.Conversion.Webhook.ClientConfig.Service = nil
		if err := c.Update(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	// Template python is stored in v1beta1 once migrated: reading it in v1alpha1 needs the webhook.
	testwrap.Eventually(t, "the conversion webhook is out of reach (a v1alpha1 read of a migrated object fails)", func() error {
		err := c.Get(ctx, client.ObjectKey{Namespace: migrationNS, Name: "python"}, &extv1alpha1.SandboxTemplate{})
		if err == nil {
			return fmt.Errorf("template python still reads in v1alpha1: the webhook still answers, or it is still stored in v1alpha1")
		}
		return nil
	})
}
