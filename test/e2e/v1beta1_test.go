//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// betaClient speaks v1beta1, as upstream's current SDKs do.
func betaClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	mustf(t, agentsv1beta1.AddToScheme(s), "scheme")
	mustf(t, extv1beta1.AddToScheme(s), "scheme")
	c, err := client.New(restCfg, client.Options{Scheme: s})
	mustf(t, err, "v1beta1 client")
	return c
}

// An agent session (docs/integrations.md) on the current upstream Python SDK, which speaks v1beta1: the claim body it sends for
// create_sandbox("python-pool", labels=..., shutdown_after_seconds=..., pod_labels=...)
// (test/integration/testdata/python-sdk-sandboxclaim.json), its wait on the claim and the
// Sandbox in v1beta1, commands as `sh -c` through the router, the TTL patched on the Sandbox in
// v1beta1, and terminate() deleting the claim.
func TestUpstreamPythonSDKSessionInV1beta1(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "sdkbeta")
	createTemplate(t, ns, "python", false)
	createPool(t, ns, "python-pool", "python", 1)
	beta := betaClient(t)

	raw, err := os.ReadFile("../integration/testdata/python-sdk-sandboxclaim.json")
	mustf(t, err, "reading the SDK fixture")
	shutdown := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05Z")
	body := &unstructured.Unstructured{}
	mustf(t, json.Unmarshal([]byte(strings.ReplaceAll(string(raw), "SHUTDOWN_TIME", shutdown)), &body.Object), "decoding the fixture")
	body.SetNamespace(ns)
	mustf(t, beta.Create(t.Context(), body), "creating the SDK's v1beta1 claim")

	claim := &extv1beta1.SandboxClaim{}
	slow.EventuallyContext(t, "claim Ready in v1beta1 with status.sandbox.name", func(ctx context.Context) error {
		if err := beta.Get(ctx, client.ObjectKeyFromObject(body), claim); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(claim.Status.Conditions, "Ready") || claim.Status.SandboxStatus.Name == "" {
			return fmt.Errorf("claim status %+v", claim.Status)
		}
		return nil
	})
	name := claim.Status.SandboxStatus.Name
	sb := &agentsv1beta1.Sandbox{}
	mustf(t, beta.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, sb), "reading the Sandbox in v1beta1")
	if !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) || len(sb.Status.PodIPs) == 0 {
		t.Fatalf("v1beta1 sandbox %s status = %+v, want Ready with pod IPs", name, sb.Status)
	}

	if out, _, code := execute(t, ns, name, "sh -c "+shQuote("echo from-v1beta1")); code != 0 || strings.TrimSpace(out) != "from-v1beta1" {
		t.Fatalf("execute through the router = %q, exit %d", out, code)
	}

	ttl := metav1.NewTime(time.Now().Add(30 * time.Minute).Truncate(time.Second))
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"shutdownTime":%q}}`, ttl.UTC().Format(time.RFC3339)))
	mustf(t, beta.Patch(t.Context(), sb, patch), "patching the TTL in v1beta1")
	stored := &agentsv1alpha1.Sandbox{}
	mustf(t, kube.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, stored), "reading the Sandbox in v1alpha1")
	if stored.Spec.ShutdownTime == nil || !stored.Spec.ShutdownTime.Equal(&ttl) {
		t.Errorf("v1alpha1 shutdownTime = %v, want %v", stored.Spec.ShutdownTime, ttl)
	}

	mustf(t, beta.Delete(t.Context(), claim), "terminate: deleting the claim")
	slow.EventuallyContext(t, "sandbox gone after terminate", func(ctx context.Context) error { return gone(ctx, stored) })
}
