package integration

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// dryRunReplace sends a CRD as a full replacement (dry run). The test control plane's CRDs
// point their conversion at the test's webhook by URL, so a server-side apply would merge the
// manifest's Service reference into that (both set: invalid); a replacement validates exactly
// what the manifest says, as on a fresh cluster.
func dryRunReplace(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(o), live); err != nil {
		t.Fatalf("getting %s %s: %v", o.GetKind(), o.GetName(), err)
	}
	o = o.DeepCopy()
	o.SetResourceVersion(live.GetResourceVersion())
	if err := k8s.Update(context.Background(), o, client.DryRunAll); err != nil {
		t.Errorf("the API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

func TestInstallConversionWebhook(t *testing.T) {
	renderHelm := func(set ...string) func(t *testing.T) []*unstructured.Unstructured {
		return func(t *testing.T) []*unstructured.Unstructured {
			objs, err := helmTemplate(t, "it-webhook", set...)
			if err != nil {
				t.Fatal(err)
			}
			return objs
		}
	}
	cases := []struct {
		name        string
		render      func(t *testing.T) []*unstructured.Unstructured
		ns          string
		certManager bool
	}{
		{"kustomize config/default rotates its own certificate", func(t *testing.T) []*unstructured.Unstructured {
			return kustomize(t, "config/default")
		}, "agent-sandbox-system", false},
		{"kustomize config/cert-manager", func(t *testing.T) []*unstructured.Unstructured {
			return kustomize(t, "config/cert-manager")
		}, "agent-sandbox-system", true},
		{"helm chart rotates its own certificate", renderHelm(), "it-webhook", false},
		{"helm chart with webhook.certManager.enabled", renderHelm("webhook.certManager.enabled=true"), "it-webhook", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := tc.render(t)
			for _, o := range objs {
				if o.GetKind() != "CustomResourceDefinition" {
					continue
				}
				strategy, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy")
				svc, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "webhook", "clientConfig", "service", "name")
				if strategy != "Webhook" || svc != "agent-sandbox-webhook-service" {
					t.Errorf("CRD %s conversion = %s via %q, want Webhook via agent-sandbox-webhook-service", o.GetName(), strategy, svc)
				}
			}
			if find(objs, "Service", "agent-sandbox-webhook-service") == nil {
				t.Error("no webhook Service")
			}
			// Both processes of a controller pod serve the webhook on one port (SO_REUSEPORT), so
			// that whichever is killed, the other answers: the controller, and a container of its
			// own that runs nothing else and so survives a controller crash.
			deploy := find(objs, "Deployment", "agent-sandbox-controller")
			containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
			args := map[string][]string{}
			ports := map[string][]any{}
			mounts := map[string][]any{}
			for _, c := range containers {
				m := c.(map[string]any)
				name, _, _ := unstructured.NestedString(m, "name")
				args[name], _, _ = unstructured.NestedStringSlice(m, "args")
				ports[name], _, _ = unstructured.NestedSlice(m, "ports")
				mounts[name], _, _ = unstructured.NestedSlice(m, "volumeMounts")
			}
			if !slices.Contains(args["conversion-webhook"], "--webhook-only") {
				t.Errorf("conversion-webhook args %v, want --webhook-only", args["conversion-webhook"])
			}
			if !slices.ContainsFunc(ports["conversion-webhook"], func(p any) bool { return p.(map[string]any)["name"] == "webhook" }) {
				t.Errorf("conversion-webhook ports %v, want the port named webhook (the Service's targetPort)", ports["conversion-webhook"])
			}
			for _, container := range []string{"controller", "conversion-webhook"} {
				a := args[container]
				if slices.Contains(a, "--enable-webhook=false") || !slices.Contains(a, "--webhook-port=9443") {
					t.Errorf("%s args %v: want the webhook served on --webhook-port=9443", container, a)
				}
				if got := slices.Contains(a, "--manage-webhook-certs=false"); got != tc.certManager {
					t.Errorf("%s args %v: --manage-webhook-certs=false present %v, want %v", container, a, got, tc.certManager)
				}
				if !slices.ContainsFunc(mounts[container], func(m any) bool { return m.(map[string]any)["name"] == "webhook-certs" }) {
					t.Errorf("%s volumeMounts %v, want the webhook-certs Secret", container, mounts[container])
				}
			}
			cert := find(objs, "Certificate", "")
			if tc.certManager != (cert != nil) || tc.certManager == (find(objs, "Secret", "agent-sandbox-webhook-certs") != nil) {
				t.Errorf("cert-manager %v: Certificate %v, own Secret %v", tc.certManager, cert != nil, find(objs, "Secret", "agent-sandbox-webhook-certs") != nil)
			}
			if cert != nil {
				for _, c := range objs {
					if c.GetKind() != "Certificate" || strings.HasSuffix(c.GetName(), "-ca") {
						continue
					}
					secret, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
					dns, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
					if secret != "agent-sandbox-webhook-certs" || !slices.Contains(dns, "agent-sandbox-webhook-service."+tc.ns+".svc") {
						t.Errorf("serving Certificate %s: secret %q, dnsNames %v", c.GetName(), secret, dns)
					}
				}
			}
		})
	}
}
