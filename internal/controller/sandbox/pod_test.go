package sandbox

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/podmeta"
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

// Seed 004's NetworkPolicy selects agents.x-k8s.io/sandbox=true: every pod carries it, whatever
// its template says, and no selector of ours requires it.
func TestEveryPodCarriesTheSandboxLabel(t *testing.T) {
	cases := []struct {
		name      string
		tmplLabel map[string]string
	}{
		{"template without it", map[string]string{"team": "a"}},
		{"template setting it to false", map[string]string{agentsv1alpha1.SandboxPodLabel: "false"}},
		{"template without labels", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}
			sb.Spec.PodTemplate.Metadata.Labels = tc.tmplLabel
			labels, _, _ := podMetadata(sb, podmeta.Rules{})
			if got := labels[agentsv1alpha1.SandboxPodLabel]; got != "true" {
				t.Errorf("pod label %s = %q, want \"true\" (labels %v)", agentsv1alpha1.SandboxPodLabel, got, labels)
			}
			if _, ok := trackingLabels(sb)[agentsv1alpha1.SandboxPodLabel]; ok {
				t.Errorf("trackingLabels carry %s: the Service and NetworkPolicy selectors must not change", agentsv1alpha1.SandboxPodLabel)
			}
		})
	}
}

func TestWithoutForeignReservedKeepsTheSandboxLabelTheControllerWants(t *testing.T) {
	r := &Reconciler{}
	sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}
	labels := map[string]string{agentsv1alpha1.SandboxPodLabel: "true", agentsv1alpha1.SandboxNameHashLabel: "x"}
	got := r.withoutForeignReserved(labels, podIdentityLabels(sb))
	if got[agentsv1alpha1.SandboxPodLabel] != "true" {
		t.Errorf("withoutForeignReserved dropped %s: %v", agentsv1alpha1.SandboxPodLabel, got)
	}
}
