package components

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

func TestConvertThroughWebhookPointsCRDsAtTheLoopbackWebhook(t *testing.T) {
	cases := []struct {
		name  string
		ports spec.Ports
		want  string
	}{
		{"default port", spec.Ports{}, "https://127.0.0.1:38443/convert"},
		{"configured port", spec.Ports{ControllerWebhook: 40443}, "https://127.0.0.1:40443/convert"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Env{Cfg: &spec.Config{Dir: t.TempDir(), Ports: tc.ports}}
			if err := os.MkdirAll(c.Cfg.Path("pki"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(c.Cfg.Path("pki"), "ca.crt"), []byte("CA"), 0o600); err != nil {
				t.Fatal(err)
			}
			crd := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"group": "agents.x-k8s.io"}}}
			if err := convertThroughWebhook(c, []*unstructured.Unstructured{crd}); err != nil {
				t.Fatal(err)
			}
			url, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "url")
			ca, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
			if url != tc.want || ca != base64.StdEncoding.EncodeToString([]byte("CA")) {
				t.Errorf("clientConfig url %q caBundle %q, want %q and the cluster CA", url, ca, tc.want)
			}
		})
	}
}
