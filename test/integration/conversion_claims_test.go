package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// betaClaimReady checks, in v1beta1, what upstream's SDKs wait for: Ready=True, status.sandbox.name
// and podIPs. It returns the sandbox name through name.
func betaClaimReady(ns, claim string, name *string) func() error {
	return func() error {
		c := &extv1beta1.SandboxClaim{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: claim}, c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, "Ready")
		if cond == nil || cond.Status != metav1.ConditionTrue || c.Status.SandboxStatus.Name == "" || len(c.Status.SandboxStatus.PodIPs) == 0 {
			return fmt.Errorf("v1beta1 claim status = %+v", c.Status)
		}
		*name = c.Status.SandboxStatus.Name
		return nil
	}
}

func TestConversionV1beta1ClaimIsServedWarmByTheSamePoolAsAV1alpha1Claim(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(2).Obj())
	testwrap.Eventually(t, "pool ready", poolReady(t, ns, "pool", 2))

	mustCreateObj(t, testwrap.MakeClaim(ns, "alpha").Template("tpl").WarmPool("pool").Obj(),
		testwrap.MakeClaimV1beta1(ns, "beta").WarmPool("pool").Obj())
	testwrap.Eventually(t, "v1alpha1 claim Ready", claimReadyIs(t, ns, "alpha", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
	var betaSandbox string
	testwrap.Eventually(t, "v1beta1 claim Ready", betaClaimReady(ns, "beta", &betaSandbox))

	alphaSandbox := getClaim(t, ns, "alpha").Status.SandboxStatus.Name
	for claim, name := range map[string]string{"alpha": alphaSandbox, "beta": betaSandbox} {
		sb := getSandbox(t, ns, name)
		if !strings.HasPrefix(name, "pool-") || sb.Labels[extv1alpha1.LaunchTypeLabel] != extv1alpha1.LaunchTypeWarm {
			t.Errorf("claim %s got sandbox %s (launch type %q), want a warm member of pool", claim, name, sb.Labels[extv1alpha1.LaunchTypeLabel])
		}
		if owner := metav1.GetControllerOf(sb); owner == nil || owner.Name != claim {
			t.Errorf("sandbox %s controller = %v, want claim %s", name, owner, claim)
		}
	}
	if alphaSandbox == betaSandbox {
		t.Errorf("both claims got sandbox %s", alphaSandbox)
	}
	stored := getClaim(t, ns, "beta")
	if stored.EffectiveWarmPool() != "pool" || stored.Spec.TemplateRef.Name != "" {
		t.Errorf("v1beta1 claim read as v1alpha1: warmpool %q, template %q; want pool and none", stored.EffectiveWarmPool(), stored.Spec.TemplateRef.Name)
	}
}

// TestConversionUpstreamPythonSDKClaim creates the SandboxClaim body the upstream Python SDK
// (k8s_agent_sandbox, CLAIM_API_VERSION v1beta1) sends for create_sandbox("python-pool",
// labels=..., shutdown_after_seconds=..., pod_labels=...), then follows its flow: watch the claim
// by field selector until Ready with status.sandbox.name, then read the Sandbox in v1beta1.
func TestConversionUpstreamPythonSDKClaim(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "python").Obj(), testwrap.MakeWarmPool(ns, "python-pool").Template("python").Replicas(1).Obj())
	testwrap.Eventually(t, "pool ready", poolReady(t, ns, "python-pool", 1))

	body := sdkFixture(t, "testdata/python-sdk-sandboxclaim.json", time.Now().Add(time.Hour))
	body.SetNamespace(ns) // the SDK puts the namespace in the URL, not the body
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwrap.DefaultTimeout)
	defer cancel()
	if err := wc.Create(ctx, body); err != nil {
		t.Fatalf("creating the SDK's v1beta1 claim: %v", err)
	}
	w, err := wc.Watch(ctx, &extv1beta1.SandboxClaimList{}, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", body.GetName())},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: body.GetResourceVersion()}})
	if err != nil {
		t.Fatalf("watching the claim as the SDK does: %v", err)
	}
	defer w.Stop()
	sandboxName := waitClaimBound(t, w)

	sb := &agentsv1beta1.Sandbox{}
	get(t, ns, sandboxName, sb)
	cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	if cond == nil || cond.Status != metav1.ConditionTrue || len(sb.Status.PodIPs) == 0 {
		t.Errorf("v1beta1 sandbox %s status = %+v, want Ready with pod IPs", sandboxName, sb.Status)
	}
	if sb.Labels["cognition.io/session"] != "sess-42" {
		t.Errorf("sandbox labels = %v, want the claim's labels passed through", sb.Labels)
	}
	claim := &extv1beta1.SandboxClaim{}
	get(t, ns, body.GetName(), claim)
	if claim.Spec.WarmPoolRef.Name != "python-pool" || claim.Spec.Lifecycle == nil || claim.Spec.Lifecycle.ShutdownPolicy != extv1beta1.ShutdownPolicyDelete {
		t.Errorf("claim read back in v1beta1 = %+v, want what the SDK sent", claim.Spec)
	}
	noConversionState(t, claim)
}

// sdkFixture loads a request body, with SHUTDOWN_TIME replaced as the SDK computes it.
func sdkFixture(t *testing.T, path string, shutdown time.Time) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.ReplaceAll(string(raw), "SHUTDOWN_TIME", shutdown.UTC().Format("2006-01-02T15:04:05Z")))
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &obj.Object); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return obj
}

// waitClaimBound reads claim events as the SDK's _watch_claim does until Ready=True and
// status.sandbox.name, and returns the sandbox name.
func waitClaimBound(t *testing.T, w watch.Interface) string {
	t.Helper()
	for ev := range w.ResultChan() {
		c, ok := ev.Object.(*extv1beta1.SandboxClaim)
		if !ok {
			t.Fatalf("claim watch event %s carries %T", ev.Type, ev.Object)
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, "Ready")
		if cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == extv1alpha1.ReasonInvalidMetadata {
			t.Fatalf("claim failed: %s", cond.Message)
		}
		if cond != nil && cond.Status == metav1.ConditionTrue && c.Status.SandboxStatus.Name != "" {
			return c.Status.SandboxStatus.Name
		}
	}
	t.Fatal("the claim watch ended before the claim was Ready")
	return ""
}

func TestConversionV1beta1ClaimWaitsForItsPool(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeClaimV1beta1(ns, "early").WarmPool("late-pool").Obj())
	testwrap.Eventually(t, "Ready=False/WarmPoolNotFound", claimReadyIs(t, ns, "early", metav1.ConditionFalse, extv1alpha1.ReasonWarmPoolNotFound))

	mustCreateObj(t, testwrap.MakeWarmPool(ns, "late-pool").Template("tpl").Replicas(1).Obj())
	var name string
	testwrap.Eventually(t, "claim Ready once its pool exists", betaClaimReady(ns, "early", &name))
	if sb := getSandbox(t, ns, name); metav1.GetControllerOf(sb) == nil || metav1.GetControllerOf(sb).Name != "early" {
		t.Errorf("sandbox %s is not controlled by the claim: %v", name, sb.OwnerReferences)
	}
}

func TestConversionV1beta1ClaimVolumeClaimTemplatesFollowTheTemplatePolicy(t *testing.T) {
	cases := []struct {
		name     string
		policy   extv1beta1.VolumeClaimTemplatesPolicy
		volume   agentsv1beta1.PersistentVolumeClaimTemplate
		rejected bool
		want     map[string]string // volume claim template name -> storage request, on the cold Sandbox
	}{
		{"Disallowed (the default) rejects the claim", "", testwrap.MakeVolumeClaim("scratch", "2Gi").ObjV1beta1(), true, nil},
		{"Allowed adds a new volume", extv1beta1.VolumeClaimTemplatesPolicyAllowed, testwrap.MakeVolumeClaim("scratch", "2Gi").ObjV1beta1(), false,
			map[string]string{"home": "1Gi", "scratch": "2Gi"}},
		{"Allowed refuses to replace the template's", extv1beta1.VolumeClaimTemplatesPolicyAllowed, testwrap.MakeVolumeClaim("home", "5Gi").ObjV1beta1(), true, nil},
		{"Overrides replaces the template's", extv1beta1.VolumeClaimTemplatesPolicyOverrides, testwrap.MakeVolumeClaim("home", "5Gi").ObjV1beta1(), false,
			map[string]string{"home": "5Gi"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			startFakeKubelet(t, ns)
			tmpl := testwrap.MakeTemplateV1beta1(ns, "tpl").VolumeClaimTemplatesPolicy(tc.policy).
				VolumeClaimTemplates(testwrap.MakeVolumeClaim("home", "1Gi").ObjV1beta1()).Obj()
			mustCreateObj(t, tmpl, testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(1).Obj())
			testwrap.Eventually(t, "pool ready", poolReady(t, ns, "pool", 1))
			mustCreateObj(t, testwrap.MakeClaimV1beta1(ns, "vols").WarmPool("pool").VolumeClaimTemplates(tc.volume).Obj())
			if tc.rejected {
				testwrap.Eventually(t, "Ready=False/VolumeClaimTemplatesError", claimReadyIs(t, ns, "vols", metav1.ConditionFalse, "VolumeClaimTemplatesError"))
				return
			}
			var name string
			testwrap.Eventually(t, "claim Ready", betaClaimReady(ns, "vols", &name))
			sb := getSandbox(t, ns, name)
			got := map[string]string{}
			for _, v := range sb.Spec.VolumeClaimTemplates {
				q := v.Spec.Resources.Requests[corev1.ResourceStorage]
				got[v.Name] = q.String()
			}
			if name != "vols" || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("sandbox %s (want the claim's own, cold) volume claim templates %v, want %v", name, got, tc.want)
			}
			testwrap.Eventually(t, "the claim's PVC exists", exists(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.volume.Name + "-vols"}}, true))
		})
	}
}
