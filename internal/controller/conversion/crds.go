package conversion

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceRef is the Service in front of the webhook that the CRDs' conversion should call.
type ServiceRef struct {
	Namespace, Name string
	Port            int32
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// crdConfigurer keeps the four CRDs' spec.conversion pointing at the webhook Service (the
// installed CRDs name agent-sandbox-system; a Helm release elsewhere is fixed here), and, when
// the certificate comes from elsewhere (cert-manager), their caBundle equal to caFile. It runs
// at start and then every interval, so a renewed CA reaches the CRDs without a restart.
type crdConfigurer struct {
	client   client.Client
	crds     []string
	service  ServiceRef
	caFile   string // empty: the caBundle is someone else's (cert-controller)
	interval time.Duration
}

func (c *crdConfigurer) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("conversion-webhook").WithName("crds")
	for {
		for _, name := range c.crds {
			if err := c.configure(ctx, name); err != nil {
				log.Error(err, "pointing the CRD's conversion at the webhook", "crd", name)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.interval):
		}
	}
}

// NeedLeaderElection is false: every replica converges the CRDs to the same state.
func (c *crdConfigurer) NeedLeaderElection() bool { return false }

// configure sets the CRD's conversion to the webhook Service (and caBundle) when it differs.
func (c *crdConfigurer) configure(ctx context.Context, name string) error {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := c.client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		return err
	}
	before := crd.DeepCopy()
	want := map[string]any{"namespace": c.service.Namespace, "name": c.service.Name, "path": Path, "port": int64(c.service.Port)}
	if err := unstructured.SetNestedField(crd.Object, "Webhook", "spec", "conversion", "strategy"); err != nil {
		return err
	}
	if err := unstructured.SetNestedStringSlice(crd.Object, []string{"v1"}, "spec", "conversion", "webhook", "conversionReviewVersions"); err != nil {
		return err
	}
	if err := unstructured.SetNestedMap(crd.Object, want, "spec", "conversion", "webhook", "clientConfig", "service"); err != nil {
		return err
	}
	unstructured.RemoveNestedField(crd.Object, "spec", "conversion", "webhook", "clientConfig", "url")
	if c.caFile != "" {
		ca, err := os.ReadFile(c.caFile)
		if err != nil {
			return fmt.Errorf("reading the webhook CA: %w", err)
		}
		if len(bytes.TrimSpace(ca)) > 0 {
			// caBundle is base64 in JSON; unstructured holds it as that string.
			if err := unstructured.SetNestedField(crd.Object, base64.StdEncoding.EncodeToString(ca), "spec", "conversion", "webhook", "clientConfig", "caBundle"); err != nil {
				return err
			}
		}
	}
	if reflect.DeepEqual(before.Object["spec"], crd.Object["spec"]) {
		return nil
	}
	return c.client.Update(ctx, crd)
}
