package v1beta1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	exthub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentshub "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

func TestSandboxOperatingModeMapsToReplicas(t *testing.T) {
	cases := []struct {
		mode     agentsv1beta1.SandboxOperatingMode
		replicas *int32
	}{
		{agentsv1beta1.SandboxOperatingModeRunning, ptr(int32(1))},
		{agentsv1beta1.SandboxOperatingModeSuspended, ptr(int32(0))},
		{"", nil},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			hub := &agentshub.Sandbox{}
			if err := (&agentsv1beta1.Sandbox{Spec: agentsv1beta1.SandboxSpec{OperatingMode: tc.mode}}).ConvertTo(hub); err != nil {
				t.Fatal(err)
			}
			if (hub.Spec.Replicas == nil) != (tc.replicas == nil) || (tc.replicas != nil && *hub.Spec.Replicas != *tc.replicas) {
				t.Errorf("replicas = %v, want %v", hub.Spec.Replicas, tc.replicas)
			}
			if len(hub.Annotations) != 0 {
				t.Errorf("annotations = %v, want none for a plain object", hub.Annotations)
			}
		})
	}
}

func TestSandboxV1beta1OnlyFieldsRideInTheAnnotationAndAreStripped(t *testing.T) {
	beta := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"user": "kept"}}}
	beta.Spec.Service = ptr(false)
	beta.Status.NodeName = "node-1"
	hub := &agentshub.Sandbox{}
	if err := beta.ConvertTo(hub); err != nil {
		t.Fatal(err)
	}
	if got := hub.Annotations[agentshub.SandboxConversionAnnotation]; got != `{"service":false,"nodeName":"node-1"}` {
		t.Errorf("stored annotation = %q", got)
	}
	back := &agentsv1beta1.Sandbox{}
	if err := back.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	if _, ok := back.Annotations[agentshub.SandboxConversionAnnotation]; ok || back.Annotations["user"] != "kept" {
		t.Errorf("served annotations = %v, want only the user's", back.Annotations)
	}
	if back.Spec.Service == nil || *back.Spec.Service || back.Status.NodeName != "node-1" {
		t.Errorf("served service %v nodeName %q, want false and node-1", back.Spec.Service, back.Status.NodeName)
	}
}

func TestClaimWarmPoolRefMapsToTemplateAndPolicy(t *testing.T) {
	cases := []struct {
		name     string
		ref      string
		template string
		warmPool exthub.WarmPoolPolicy
	}{
		{"a named pool selects that pool; the controller takes its template", "python-pool", "", "python-pool"},
		{"a shadow pool is any pool of its template", "shadow-pool-python", "python", exthub.WarmPoolPolicyDefault},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hub := &exthub.SandboxClaim{}
			beta := &extv1beta1.SandboxClaim{Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: tc.ref}}}
			if err := beta.ConvertTo(hub); err != nil {
				t.Fatal(err)
			}
			if hub.Spec.TemplateRef.Name != tc.template || hub.EffectiveWarmPool() != tc.warmPool || len(hub.Annotations) != 0 {
				t.Errorf("hub template %q warmpool %q annotations %v, want %q %q none",
					hub.Spec.TemplateRef.Name, hub.EffectiveWarmPool(), hub.Annotations, tc.template, tc.warmPool)
			}
		})
	}
}

func TestClaimV1alpha1SelectionSurvivesOnlyWhileThePoolIsTheSame(t *testing.T) {
	none := exthub.WarmPoolPolicyNone
	hub := &exthub.SandboxClaim{Spec: exthub.SandboxClaimSpec{TemplateRef: exthub.SandboxTemplateRef{Name: "python"}, WarmPool: &none}}
	beta := &extv1beta1.SandboxClaim{}
	if err := beta.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	if beta.Spec.WarmPoolRef.Name != "shadow-pool-python" {
		t.Fatalf("warmPoolRef = %q, want shadow-pool-python", beta.Spec.WarmPoolRef.Name)
	}
	cases := []struct {
		name     string
		ref      string
		template string
		warmPool exthub.WarmPoolPolicy
	}{
		{"same pool: the v1alpha1 fields come back", "shadow-pool-python", "python", exthub.WarmPoolPolicyNone},
		{"pool changed in v1beta1: the new pool wins", "gpu-pool", "", "gpu-pool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			edited := beta.DeepCopy()
			edited.Spec.WarmPoolRef.Name = tc.ref
			back := &exthub.SandboxClaim{}
			if err := edited.ConvertTo(back); err != nil {
				t.Fatal(err)
			}
			if back.Spec.TemplateRef.Name != tc.template || back.EffectiveWarmPool() != tc.warmPool {
				t.Errorf("template %q warmpool %q, want %q %q", back.Spec.TemplateRef.Name, back.EffectiveWarmPool(), tc.template, tc.warmPool)
			}
		})
	}
}
