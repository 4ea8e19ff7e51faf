package testwrap

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

func TestMakeSandbox(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	got := MakeSandbox("ns", "sb").
		Label("team", "a").Annotation("note", "x").
		PodLabel("app", "agent").PodAnnotations(map[string]string{"why": "test"}).
		Image("img:1").Env("A", "1").Env("A", "2").
		Volume(MakeVolumeClaim("home", "1Gi").Label("purpose", "home").Obj(), "/home/agent").
		Replicas(0).ShutdownTime(at).ShutdownPolicy(agentsv1alpha1.ShutdownPolicyDelete).
		ReadyWith("10.0.0.1").Obj()

	c := RuntimeContainer()
	c.Image = "img:1"
	c.Env = []corev1.EnvVar{{Name: "A", Value: "2"}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "home", MountPath: "/home/agent"}}
	want := &agentsv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb", Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": "x"}},
		Spec: agentsv1alpha1.SandboxSpec{
			PodTemplate: agentsv1alpha1.PodTemplate{
				Metadata: agentsv1alpha1.PodMetadata{Labels: map[string]string{"app": "agent"}, Annotations: map[string]string{"why": "test"}},
				Spec:     corev1.PodSpec{Containers: []corev1.Container{c}},
			},
			VolumeClaimTemplates: []agentsv1alpha1.PersistentVolumeClaimTemplate{{
				EmbeddedObjectMetadata: agentsv1alpha1.EmbeddedObjectMetadata{Name: "home", Labels: map[string]string{"purpose": "home"}},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
			Lifecycle: agentsv1alpha1.Lifecycle{ShutdownTime: &metav1.Time{Time: at}, ShutdownPolicy: ptr.To(agentsv1alpha1.ShutdownPolicyDelete)},
			Replicas:  ptr.To[int32](0),
		},
		Status: agentsv1alpha1.SandboxStatus{
			PodIPs:     []string{"10.0.0.1"},
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: agentsv1alpha1.ReasonReady}},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("MakeSandbox (-want +got):\n%s", d)
	}
}

func TestObjIsACopy(t *testing.T) {
	base := MakeTemplate("ns", "tpl").PodLabel("app", "agent")
	first := base.Obj()
	first.Spec.PodTemplate.Metadata.Labels["app"] = "changed"
	first.Spec.PodTemplate.Spec.Containers[0].Image = "changed"
	second := base.Clone().Image("other").Obj()
	if got := base.Obj(); got.Spec.PodTemplate.Metadata.Labels["app"] != "agent" || got.Spec.PodTemplate.Spec.Containers[0].Image != RuntimeImage {
		t.Errorf("editing an Obj changed the wrapper: %+v", got.Spec.PodTemplate)
	}
	if base.Obj().Spec.PodTemplate.Spec.Containers[0].Image != RuntimeImage || second.Spec.PodTemplate.Spec.Containers[0].Image != "other" {
		t.Error("a Clone's edit reached the wrapper it was cloned from")
	}
}

func TestMakeTemplate(t *testing.T) {
	np := &extv1alpha1.NetworkPolicySpec{}
	got := MakeTemplate("ns", "tpl").EnvInjection(extv1alpha1.EnvVarsInjectionPolicyAllowed).NetworkPolicy(np).
		NetworkPolicyManagement(extv1alpha1.NetworkPolicyManagementUnmanaged).Command("python").TerminationGracePeriod(5).Obj()
	want := &extv1alpha1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tpl"},
		Spec: extv1alpha1.SandboxTemplateSpec{
			PodTemplate: agentsv1alpha1.PodTemplate{Spec: corev1.PodSpec{
				Containers:                    []corev1.Container{RuntimeContainer()},
				TerminationGracePeriodSeconds: ptr.To[int64](5),
			}},
			NetworkPolicy:           np,
			NetworkPolicyManagement: extv1alpha1.NetworkPolicyManagementUnmanaged,
			EnvVarsInjectionPolicy:  extv1alpha1.EnvVarsInjectionPolicyAllowed,
		},
	}
	want.Spec.PodTemplate.Spec.Containers[0].Command = []string{"python"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("MakeTemplate (-want +got):\n%s", d)
	}
}

func TestMakeClaim(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	got := MakeClaim("ns", "c").Template("python").WarmPool("none").
		Env("A", "1").EnvVars(extv1alpha1.EnvVar{Name: "B", Value: "2", ContainerName: "side"}).
		PodLabel("tenant", "acme").
		ShutdownTime(at).ShutdownPolicy(extv1alpha1.ShutdownPolicyDeleteForeground).TTLAfterFinished(30).
		ReadyWith("pool-x1", "10.0.0.9").Obj()
	want := &extv1alpha1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec: extv1alpha1.SandboxClaimSpec{
			TemplateRef:           extv1alpha1.SandboxTemplateRef{Name: "python"},
			WarmPool:              ptr.To(extv1alpha1.WarmPoolPolicyNone),
			Env:                   []extv1alpha1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2", ContainerName: "side"}},
			AdditionalPodMetadata: agentsv1alpha1.PodMetadata{Labels: map[string]string{"tenant": "acme"}},
			Lifecycle: &extv1alpha1.Lifecycle{ShutdownTime: &metav1.Time{Time: at},
				ShutdownPolicy: extv1alpha1.ShutdownPolicyDeleteForeground, TTLSecondsAfterFinished: ptr.To[int32](30)},
		},
		Status: extv1alpha1.SandboxClaimStatus{
			SandboxStatus: extv1alpha1.SandboxStatus{Name: "pool-x1", PodIPs: []string{"10.0.0.9"}},
			Conditions:    []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "DependenciesReady"}},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("MakeClaim (-want +got):\n%s", d)
	}
}

func TestMakeWarmPool(t *testing.T) {
	got := MakeWarmPool("ns", "pool").Template("tpl").Replicas(3).
		UpdateStrategy(extv1alpha1.RecreateSandboxWarmPoolUpdateStrategyType).Annotation("k", "v").Obj()
	want := &extv1alpha1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", Annotations: map[string]string{"k": "v"}},
		Spec: extv1alpha1.SandboxWarmPoolSpec{Replicas: 3, TemplateRef: extv1alpha1.SandboxTemplateRef{Name: "tpl"},
			UpdateStrategy: extv1alpha1.SandboxWarmPoolUpdateStrategy{Type: extv1alpha1.RecreateSandboxWarmPoolUpdateStrategyType}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("MakeWarmPool (-want +got):\n%s", d)
	}
}

func TestObjectMetadata(t *testing.T) {
	pool := MakeWarmPool("ns", "pool").UID("pool-uid").Obj()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	got := MakeSandbox("ns", "").GenerateName("pool-").UID("u1").ResourceVersion("7").Generation(2).
		Created(at).Deleting(at.Add(time.Minute)).Finalizers("hold").
		ControlledBy(pool, extv1alpha1.GroupVersion.WithKind("SandboxWarmPool")).Obj().ObjectMeta
	want := metav1.ObjectMeta{
		Namespace: "ns", GenerateName: "pool-", UID: "u1", ResourceVersion: "7", Generation: 2,
		CreationTimestamp: metav1.NewTime(at), DeletionTimestamp: ptr.To(metav1.NewTime(at.Add(time.Minute))), Finalizers: []string{"hold"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1alpha1", Kind: "SandboxWarmPool", Name: "pool",
			UID: "pool-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("object metadata (-want +got):\n%s", d)
	}
}

func TestV1beta1Variants(t *testing.T) {
	vct := MakeVolumeClaim("home", "1Gi").StorageClass("local").ObjV1beta1()
	sb := MakeSandboxV1beta1("ns", "sb").Service(true).VolumeClaimTemplates(vct).Obj()
	if sb.Spec.Service == nil || !*sb.Spec.Service || len(sb.Spec.VolumeClaimTemplates) != 1 ||
		sb.Spec.PodTemplate.Spec.Containers[0].Name != "runtime" {
		t.Errorf("v1beta1 Sandbox spec = %+v", sb.Spec)
	}
	if got := sb.Spec.VolumeClaimTemplates[0]; got.Name != "home" || *got.Spec.StorageClassName != "local" {
		t.Errorf("v1beta1 volume claim template = %+v", got)
	}
	tmpl := MakeTemplateV1beta1("ns", "tpl").VolumeClaimTemplatesPolicy(extv1beta1.VolumeClaimTemplatesPolicyAllowed).
		VolumeClaimTemplates(vct).PodLabel("a", "b").Obj()
	if tmpl.Spec.VolumeClaimTemplatesPolicy != extv1beta1.VolumeClaimTemplatesPolicyAllowed || len(tmpl.Spec.VolumeClaimTemplates) != 1 ||
		tmpl.Spec.PodTemplate.ObjectMeta.Labels["a"] != "b" {
		t.Errorf("v1beta1 template spec = %+v", tmpl.Spec)
	}
	claim := MakeClaimV1beta1("ns", "c").WarmPool("pool").VolumeClaimTemplates(vct).Obj()
	want := extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"},
		VolumeClaimTemplates: []agentsv1beta1.PersistentVolumeClaimTemplate{vct}}
	if d := cmp.Diff(want, claim.Spec); d != "" {
		t.Errorf("v1beta1 claim spec (-want +got):\n%s", d)
	}
}
