package v1alpha1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	exthub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentshub "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

func TestSandboxReplicasMapToOperatingMode(t *testing.T) {
	cases := []struct {
		replicas *int32
		mode     agentshub.SandboxOperatingMode
	}{
		{ptr(int32(1)), agentshub.SandboxOperatingModeRunning},
		{ptr(int32(0)), agentshub.SandboxOperatingModeSuspended},
		{nil, ""},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			hub := &agentshub.Sandbox{}
			if err := (&agentsv1alpha1.Sandbox{Spec: agentsv1alpha1.SandboxSpec{Replicas: tc.replicas}}).ConvertTo(hub); err != nil {
				t.Fatal(err)
			}
			if hub.Spec.OperatingMode != tc.mode {
				t.Errorf("operatingMode = %q, want %q", hub.Spec.OperatingMode, tc.mode)
			}
			if len(hub.Annotations) != 0 {
				t.Errorf("annotations = %v, want none for a plain object", hub.Annotations)
			}
		})
	}
}

func TestSandboxV1beta1OnlyFieldsRideInTheAnnotationAndAreStripped(t *testing.T) {
	hub := &agentshub.Sandbox{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"user": "kept"}}}
	hub.Spec.Service = ptr(false)
	hub.Status.NodeName = "node-1"
	alpha := &agentsv1alpha1.Sandbox{}
	if err := alpha.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	if got := alpha.Annotations[agentsv1alpha1.SandboxConversionAnnotation]; got != `{"service":false,"nodeName":"node-1"}` {
		t.Errorf("served v1alpha1 annotation = %q", got)
	}
	back := &agentshub.Sandbox{}
	if err := alpha.ConvertTo(back); err != nil {
		t.Fatal(err)
	}
	if _, ok := back.Annotations[agentsv1alpha1.SandboxConversionAnnotation]; ok || back.Annotations["user"] != "kept" {
		t.Errorf("stored annotations = %v, want only the user's", back.Annotations)
	}
	if back.Spec.Service == nil || *back.Spec.Service || back.Status.NodeName != "node-1" {
		t.Errorf("stored service %v nodeName %q, want false and node-1", back.Spec.Service, back.Status.NodeName)
	}
}

func TestClaimWarmPoolRefMapsToTemplateAndPolicy(t *testing.T) {
	cases := []struct {
		name     string
		ref      string
		template string
		warmPool extv1alpha1.WarmPoolPolicy
	}{
		{"a named pool selects that pool; the controller takes its template", "python-pool", "", "python-pool"},
		{"a shadow pool is any pool of its template", "shadow-pool-python", "python", extv1alpha1.WarmPoolPolicyDefault},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hub := &exthub.SandboxClaim{Spec: exthub.SandboxClaimSpec{WarmPoolRef: exthub.SandboxWarmPoolRef{Name: tc.ref}}}
			alpha := &extv1alpha1.SandboxClaim{}
			if err := alpha.ConvertFrom(hub); err != nil {
				t.Fatal(err)
			}
			if alpha.Spec.TemplateRef.Name != tc.template || alpha.EffectiveWarmPool() != tc.warmPool || len(alpha.Annotations) != 0 {
				t.Errorf("v1alpha1 template %q warmpool %q annotations %v, want %q %q none",
					alpha.Spec.TemplateRef.Name, alpha.EffectiveWarmPool(), alpha.Annotations, tc.template, tc.warmPool)
			}
			if hub.TemplateName() != tc.template || string(hub.EffectiveWarmPool()) != string(tc.warmPool) {
				t.Errorf("stored claim's accessors: template %q warmpool %q, want %q %q",
					hub.TemplateName(), hub.EffectiveWarmPool(), tc.template, tc.warmPool)
			}
		})
	}
}

// A v1alpha1 claim's selection that warmPoolRef cannot express rides on the stored object; the
// controller reads it through the accessors, and it gives way once warmPoolRef names another pool.
func TestClaimV1alpha1SelectionSurvivesOnlyWhileThePoolIsTheSame(t *testing.T) {
	none := extv1alpha1.WarmPoolPolicyNone
	alpha := &extv1alpha1.SandboxClaim{Spec: extv1alpha1.SandboxClaimSpec{TemplateRef: extv1alpha1.SandboxTemplateRef{Name: "python"}, WarmPool: &none}}
	stored := &exthub.SandboxClaim{}
	if err := alpha.ConvertTo(stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.WarmPoolRef.Name != "shadow-pool-python" {
		t.Fatalf("warmPoolRef = %q, want shadow-pool-python", stored.Spec.WarmPoolRef.Name)
	}
	cases := []struct {
		name     string
		ref      string
		template string
		warmPool extv1alpha1.WarmPoolPolicy
	}{
		{"same pool: the v1alpha1 fields come back", "shadow-pool-python", "python", extv1alpha1.WarmPoolPolicyNone},
		{"pool changed in v1beta1: the new pool wins", "gpu-pool", "", "gpu-pool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			edited := stored.DeepCopy()
			edited.Spec.WarmPoolRef.Name = tc.ref
			if edited.TemplateName() != tc.template || string(edited.EffectiveWarmPool()) != string(tc.warmPool) {
				t.Errorf("accessors: template %q warmpool %q, want %q %q", edited.TemplateName(), edited.EffectiveWarmPool(), tc.template, tc.warmPool)
			}
			back := &extv1alpha1.SandboxClaim{}
			if err := back.ConvertFrom(edited); err != nil {
				t.Fatal(err)
			}
			if back.Spec.TemplateRef.Name != tc.template || back.EffectiveWarmPool() != tc.warmPool {
				t.Errorf("template %q warmpool %q, want %q %q", back.Spec.TemplateRef.Name, back.EffectiveWarmPool(), tc.template, tc.warmPool)
			}
		})
	}
}

// A plain v1alpha1 object stores with no annotation: the defaults of each version map onto each
// other (warmpool default, volumeClaimTemplatesPolicy Disallowed).
func TestPlainV1alpha1ObjectsCarryNoAnnotation(t *testing.T) {
	def := extv1alpha1.WarmPoolPolicyDefault
	claim := &extv1alpha1.SandboxClaim{Spec: extv1alpha1.SandboxClaimSpec{TemplateRef: extv1alpha1.SandboxTemplateRef{Name: "python"}, WarmPool: &def}}
	storedClaim := &exthub.SandboxClaim{}
	if err := claim.ConvertTo(storedClaim); err != nil {
		t.Fatal(err)
	}
	tmpl := &exthub.SandboxTemplate{Spec: exthub.SandboxTemplateSpec{VolumeClaimTemplatesPolicy: exthub.VolumeClaimTemplatesPolicyDisallowed}}
	servedTmpl := &extv1alpha1.SandboxTemplate{}
	if err := servedTmpl.ConvertFrom(tmpl); err != nil {
		t.Fatal(err)
	}
	for name, annotations := range map[string]map[string]string{"stored claim": storedClaim.Annotations, "served template": servedTmpl.Annotations} {
		if len(annotations) != 0 {
			t.Errorf("%s annotations = %v, want none", name, annotations)
		}
	}
}
