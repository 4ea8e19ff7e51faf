package components

import (
	"encoding/base64"
	"fmt"
	"os"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/conversion"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// The conversion webhook of the local cluster: our controller runs on the host, so the CRDs
// call it on loopback by URL, with a serving certificate from the cluster CA (pki/webhook.*),
// instead of through a Service with a certificate the controller rotates itself.

// webhookArgs serve the conversion webhook on loopback with the cluster CA's certificate.
func webhookArgs(e Env) []string {
	return []string{
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(e.Cfg.WebhookPort()),
		"--webhook-cert-dir=" + e.Cfg.Path("pki"),
		"--webhook-cert-name=webhook.crt",
		"--webhook-key-name=webhook.key",
		"--manage-webhook-certs=false",
		"--webhook-configure-crds=false",
	}
}

// convertThroughWebhook points the CRDs' conversion at the controller's loopback webhook.
func convertThroughWebhook(e Env, crds []*unstructured.Unstructured) error {
	ca, err := os.ReadFile(e.Cfg.Path("pki", "ca.crt"))
	if err != nil {
		return err
	}
	conv := map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig": map[string]any{
				"url":      fmt.Sprintf("https://%s%s", spec.Loopback(e.Cfg.WebhookPort()), conversion.Path),
				"caBundle": base64.StdEncoding.EncodeToString(ca),
			},
		},
	}
	for _, crd := range crds {
		if err := unstructured.SetNestedField(crd.Object, conv, "spec", "conversion"); err != nil {
			return fmt.Errorf("CRD %s: %w", crd.GetName(), err)
		}
	}
	return nil
}
