package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func get(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("getting %T %s: %v", obj, name, err)
	}
}

// noConversionState fails when an object served in v1beta1 shows a conversion annotation: the
// state kept on the stored object is stripped on the way out, and a v1alpha1-only value rides
// along only while it cannot be derived (e.g. status.replicas of a pod that has no IP yet).
func noConversionState(t *testing.T, obj client.Object) {
	t.Helper()
	for _, key := range []string{agentsv1alpha1.SandboxConversionAnnotation, extv1alpha1.SandboxClaimConversionAnnotation,
		extv1alpha1.SandboxTemplateConversionAnnotation, extv1alpha1.SandboxWarmPoolConversionAnnotation} {
		if v, ok := obj.GetAnnotations()[key]; ok {
			t.Errorf("%T %s shows the conversion annotation %s=%s", obj, obj.GetName(), key, v)
		}
	}
}

func TestConversionCreateInOneVersionReadInTheOther(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"v1alpha1 Sandbox replicas 0 reads as v1beta1 Suspended", func(t *testing.T) {
			create(t, testwrap.MakeSandbox(ns, "alpha-paused").Replicas(0).
				ShutdownTime(time.Now().Add(time.Hour)).ShutdownPolicy(agentsv1alpha1.ShutdownPolicyDelete).Obj())
			got := &agentsv1beta1.Sandbox{}
			get(t, ns, "alpha-paused", got)
			if got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended || got.Spec.ShutdownPolicy == nil ||
				*got.Spec.ShutdownPolicy != agentsv1beta1.ShutdownPolicyDelete || got.Spec.PodTemplate.Spec.Containers[0].Name != "runtime" {
				t.Errorf("v1beta1 spec = %+v", got.Spec)
			}
			noConversionState(t, got)
		}},
		{"v1beta1 Sandbox defaults to Running and reads as v1alpha1 replicas 1, keeping spec.service", func(t *testing.T) {
			sb := testwrap.MakeSandboxV1beta1(ns, "beta-running").Service(true).Obj()
			mustCreateObj(t, sb)
			if sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeRunning || *sb.Spec.ShutdownPolicy != agentsv1beta1.ShutdownPolicyRetain {
				t.Errorf("v1beta1 defaults = %q/%v, want Running/Retain", sb.Spec.OperatingMode, sb.Spec.ShutdownPolicy)
			}
			alpha := getSandbox(t, ns, "beta-running")
			if alpha.DesiredReplicas() != 1 || alpha.EffectiveShutdownPolicy() != agentsv1alpha1.ShutdownPolicyRetain {
				t.Errorf("v1alpha1 replicas/policy = %d/%s, want 1/Retain", alpha.DesiredReplicas(), alpha.EffectiveShutdownPolicy())
			}
			back := &agentsv1beta1.Sandbox{}
			get(t, ns, "beta-running", back)
			if back.Spec.Service == nil || !*back.Spec.Service {
				t.Errorf("v1beta1 spec.service = %v after a round trip through storage, want true", back.Spec.Service)
			}
			noConversionState(t, back)
		}},
		{"v1beta1 template keeps volumeClaimTemplatesPolicy; v1alpha1 sees its defaults", func(t *testing.T) {
			mustCreateObj(t, testwrap.MakeTemplateV1beta1(ns, "beta-tmpl").VolumeClaimTemplatesPolicy(extv1beta1.VolumeClaimTemplatesPolicyAllowed).Obj())
			alpha := &extv1alpha1.SandboxTemplate{}
			get(t, ns, "beta-tmpl", alpha)
			if alpha.Spec.EnvVarsInjectionPolicy != extv1alpha1.EnvVarsInjectionPolicyDisallowed || alpha.Spec.NetworkPolicyManagement != extv1alpha1.NetworkPolicyManagementManaged {
				t.Errorf("v1alpha1 template spec = %+v, want the defaults", alpha.Spec)
			}
			back := &extv1beta1.SandboxTemplate{}
			get(t, ns, "beta-tmpl", back)
			if back.Spec.VolumeClaimTemplatesPolicy != extv1beta1.VolumeClaimTemplatesPolicyAllowed {
				t.Errorf("v1beta1 volumeClaimTemplatesPolicy = %q, want Allowed", back.Spec.VolumeClaimTemplatesPolicy)
			}
			noConversionState(t, back)
		}},
		{"v1alpha1 pool reads as v1beta1 with replicas and strategy", func(t *testing.T) {
			mustCreateObj(t, testwrap.MakeWarmPool(ns, "alpha-pool").Template("missing-template").Replicas(3).
				UpdateStrategy(extv1alpha1.RecreateSandboxWarmPoolUpdateStrategyType).Obj())
			got := &extv1beta1.SandboxWarmPool{}
			get(t, ns, "alpha-pool", got)
			if got.Spec.Replicas == nil || *got.Spec.Replicas != 3 || got.Spec.UpdateStrategy == nil ||
				got.Spec.UpdateStrategy.Type != extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType || got.Spec.TemplateRef.Name != "missing-template" {
				t.Errorf("v1beta1 pool spec = %+v", got.Spec)
			}
		}},
		{"v1alpha1 claim with the default policy reads as v1beta1 shadow pool of its template", func(t *testing.T) {
			mustCreateObj(t, testwrap.MakeClaim(ns, "alpha-claim").Template("python").Obj())
			got := &extv1beta1.SandboxClaim{}
			get(t, ns, "alpha-claim", got)
			if got.Spec.WarmPoolRef.Name != extv1alpha1.ShadowPoolPrefix+"python" {
				t.Errorf("v1beta1 warmPoolRef = %q, want %s", got.Spec.WarmPoolRef.Name, extv1alpha1.ShadowPoolPrefix+"python")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.check)
	}
}

func TestConversionPatchInV1beta1SuspendsAV1alpha1Sandbox(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "patched").Volume(homeVolume(), "/home/agent").Obj())
	setPodStatus(t, waitForPod(t, ns, "patched"), running("10.0.9.1"))
	testwrap.Eventually(t, "Ready=True", readyIs(t, ns, "patched", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))

	beta := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "patched"}}
	patch := []byte(`{"metadata":{"labels":{"tenant":"acme"}},"spec":{"operatingMode":"Suspended"}}`)
	if err := k8s.Patch(context.Background(), beta, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("merge-patching in v1beta1: %v", err)
	}
	testwrap.Eventually(t, "pod deleted on suspend", exists(podOf(ns, "patched"), false))
	testwrap.Eventually(t, "Ready=False/SandboxPaused", readyIs(t, ns, "patched", metav1.ConditionFalse, agentsv1alpha1.ReasonPaused))
	alpha := getSandbox(t, ns, "patched")
	if alpha.DesiredReplicas() != 0 || alpha.Labels["tenant"] != "acme" || len(alpha.Spec.VolumeClaimTemplates) != 1 {
		t.Errorf("v1alpha1 after the v1beta1 patch: replicas %d, labels %v, %d volume claim templates; want 0, tenant=acme, 1",
			alpha.DesiredReplicas(), alpha.Labels, len(alpha.Spec.VolumeClaimTemplates))
	}
	testwrap.Eventually(t, "status in v1beta1 shows the suspension", func() error {
		got := &agentsv1beta1.Sandbox{}
		get(t, ns, "patched", got)
		c := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || len(got.Status.PodIPs) != 0 {
			return fmt.Errorf("v1beta1 status = %+v", got.Status)
		}
		return nil
	})
}

// The agent harness pauses with `kubectl patch sandbox X --type merge -p '{"spec":{"replicas":0}}'`,
// written against v1alpha1; kubectl sends it to the preferred version, v1beta1, which has no
// replicas. The write is refused with the way to say it there, never pruned with a warning while
// nothing pauses.
func TestV1alpha1ReplicasSentToV1beta1AreRefusedNamingOperatingMode(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "running").Obj())
	wantRefusal := []string{"spec.replicas is a v1alpha1 field", "spec.operatingMode", "kubectl scale sandboxes.v1alpha1.agents.x-k8s.io"}
	cases := []struct {
		name  string
		write func() error
	}{
		{"merge patch of replicas 0", func() error {
			beta := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "running"}}
			return k8s.Patch(context.Background(), beta, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`)))
		}},
		{"create with replicas", func() error {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": agentsv1beta1.GroupVersion.String(), "kind": "Sandbox",
				"metadata": map[string]any{"namespace": ns, "name": "created-with-replicas"},
				"spec": map[string]any{"replicas": int64(1), "podTemplate": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}},
			}}
			return k8s.Create(context.Background(), u)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write()
			if !apierrors.IsInvalid(err) {
				t.Fatalf("write in v1beta1: %v, want Invalid", err)
			}
			for _, w := range wantRefusal {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q does not name %q", err, w)
				}
			}
		})
	}
	if got := getSandbox(t, ns, "running"); got.DesiredReplicas() != 1 {
		t.Errorf("replicas after the refused patch: %d, want 1 (unchanged)", got.DesiredReplicas())
	}
}

func TestConversionWatchInV1beta1SeesV1alpha1WritesAndControllerStatus(t *testing.T) {
	ns := newNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), testwrap.DefaultTimeout)
	defer cancel()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &agentsv1beta1.SandboxList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatalf("watching v1beta1 sandboxes: %v", err)
	}
	defer w.Stop()
	create(t, testwrap.MakeSandbox(ns, "watched").Obj())
	setPodStatus(t, waitForPod(t, ns, "watched"), running("10.0.9.2"))

	var sawAdded bool
	for ev := range w.ResultChan() {
		sb, ok := ev.Object.(*agentsv1beta1.Sandbox)
		if !ok {
			t.Fatalf("watch event %s carries %T, want a v1beta1 Sandbox", ev.Type, ev.Object)
		}
		sawAdded = sawAdded || ev.Type == watch.Added
		c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
		if ev.Type == watch.Modified && c != nil && c.Status == metav1.ConditionTrue {
			if !sawAdded || sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeRunning || len(sb.Status.PodIPs) != 1 || sb.Status.ServiceFQDN == "" {
				t.Errorf("v1beta1 watch: added seen %v, ready sandbox %+v", sawAdded, sb.Status)
			}
			noConversionState(t, sb)
			return
		}
	}
	t.Fatalf("the v1beta1 watch ended before the controller reported Ready (added seen: %v)", sawAdded)
}
