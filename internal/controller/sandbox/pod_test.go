package sandbox

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/podmeta"
)

func TestWithoutForeignReservedDropsOnlyWhatTheControllerAlonePutsOnPods(t *testing.T) {
	r := &Reconciler{podRules: podmeta.Rules{RouterLabels: map[string]string{"role": "router"}}}
	want := map[string]string{"agents.x-k8s.io/sandbox-name-hash": "abc", "team": "a"}
	cases := []struct {
		name   string
		labels map[string]string
		expect map[string]string
	}{
		{"wanted keys stay, ours included", map[string]string{"agents.x-k8s.io/sandbox-name-hash": "abc", "team": "a"},
			map[string]string{"agents.x-k8s.io/sandbox-name-hash": "abc", "team": "a"}},
		{"a foreign agents.x-k8s.io key goes", map[string]string{"agents.x-k8s.io/warm-pool-sandbox": "x", "team": "a"},
			map[string]string{"team": "a"}},
		{"a subdomain of ours goes", map[string]string{"extensions.agents.x-k8s.io/x": "y"}, nil},
		{"the router's identity goes", map[string]string{"app": "sandbox-router", "app.kubernetes.io/name": "sandbox-router", "team": "a"},
			map[string]string{"team": "a"}},
		{"the configured router label goes", map[string]string{"role": "router"}, nil},
		{"other apps and other domains stay", map[string]string{"app": "web", "kueue.x-k8s.io/queue": "q"},
			map[string]string{"app": "web", "kueue.x-k8s.io/queue": "q"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.withoutForeignReserved(tc.labels, want); !reflect.DeepEqual(got, tc.expect) {
				t.Errorf("withoutForeignReserved(%v) = %v, want %v", tc.labels, got, tc.expect)
			}
		})
	}
}

// The agent-session flow's NetworkPolicy selects agents.x-k8s.io/sandbox=true: every pod carries it, whatever
// its template says, and no selector of ours requires it.
func TestEveryPodCarriesTheSandboxLabel(t *testing.T) {
	cases := []struct {
		name      string
		tmplLabel map[string]string
	}{
		{"template without it", map[string]string{"team": "a"}},
		{"template setting it to false", map[string]string{agentsv1beta1.SandboxPodLabel: "false"}},
		{"template without labels", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}
			sb.Spec.PodTemplate.ObjectMeta.Labels = tc.tmplLabel
			labels, _, _ := podMetadata(sb, podmeta.Rules{})
			if got := labels[agentsv1beta1.SandboxPodLabel]; got != "true" {
				t.Errorf("pod label %s = %q, want \"true\" (labels %v)", agentsv1beta1.SandboxPodLabel, got, labels)
			}
			if _, ok := trackingLabels(sb)[agentsv1beta1.SandboxPodLabel]; ok {
				t.Errorf("trackingLabels carry %s: the Service and NetworkPolicy selectors must not change", agentsv1beta1.SandboxPodLabel)
			}
		})
	}
}

func TestWithoutForeignReservedKeepsTheSandboxLabelTheControllerWants(t *testing.T) {
	r := &Reconciler{}
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}
	labels := map[string]string{agentsv1beta1.SandboxPodLabel: "true", agentsv1beta1.SandboxNameHashLabel: "x"}
	got := r.withoutForeignReserved(labels, podIdentityLabels(sb))
	if got[agentsv1beta1.SandboxPodLabel] != "true" {
		t.Errorf("withoutForeignReserved dropped %s: %v", agentsv1beta1.SandboxPodLabel, got)
	}
}

// Every sandbox pod is hardened where its spec says nothing, a raw Sandbox's included, and a
// raw Sandbox runs on the installation's default runtime class; a template's Sandbox keeps the
// class its builder chose (none: the node's default, asked for with runtimeClassName: "").
func TestEverySandboxPodIsHardened(t *testing.T) {
	hardening := blueprint.Builder{RuntimeClassName: "gvisor"}
	cases := []struct {
		name             string
		annotations      map[string]string
		runtimeClass     *string
		wantRuntimeClass string
	}{
		{name: "a raw Sandbox gets the default runtime class", wantRuntimeClass: "gvisor"},
		{name: "a raw Sandbox keeps its own class", runtimeClass: ptr.To("kata"), wantRuntimeClass: "kata"},
		{name: "a template's Sandbox on the node's default runtime stays there",
			annotations: map[string]string{extv1beta1.TemplateRefAnnotation: "tmpl"}, wantRuntimeClass: "<none>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1", Annotations: tc.annotations}}
			sb.Spec.PodTemplate.Spec.RuntimeClassName = tc.runtimeClass
			sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "runtime", Image: "runtime:1"}}
			pod, _ := buildPod(sb, podmeta.Rules{}, hardening)
			if got := ptr.Deref(pod.Spec.RuntimeClassName, "<none>"); got != tc.wantRuntimeClass {
				t.Errorf("runtimeClassName %s, want %s", got, tc.wantRuntimeClass)
			}
			if sc := pod.Spec.SecurityContext; sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || sc.SeccompProfile == nil {
				t.Errorf("pod securityContext %+v, want runAsNonRoot and a seccomp profile", sc)
			}
			if c := pod.Spec.Containers[0].SecurityContext; c == nil || ptr.Deref(c.AllowPrivilegeEscalation, true) || c.Capabilities == nil {
				t.Errorf("container securityContext %+v, want no escalation and dropped capabilities", c)
			}
			if sb.Spec.PodTemplate.Spec.SecurityContext != nil {
				t.Error("building the pod changed the Sandbox's own spec")
			}
		})
	}
}
