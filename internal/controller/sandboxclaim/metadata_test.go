package sandboxclaim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

func TestMergePodMetadata(t *testing.T) {
	cases := []struct {
		name     string
		dst, add agentsv1beta1.PodMetadata
		want     agentsv1beta1.PodMetadata
	}{
		{"adds to the template's", agentsv1beta1.PodMetadata{Labels: map[string]string{"app": "agent"}, Annotations: map[string]string{"a": "1"}},
			agentsv1beta1.PodMetadata{Labels: map[string]string{"tenant": "acme"}, Annotations: map[string]string{"b": "2"}},
			agentsv1beta1.PodMetadata{Labels: map[string]string{"app": "agent", "tenant": "acme"}, Annotations: map[string]string{"a": "1", "b": "2"}}},
		{"the claim's value wins on the same key", agentsv1beta1.PodMetadata{Labels: map[string]string{"team": "a"}},
			agentsv1beta1.PodMetadata{Labels: map[string]string{"team": "b"}},
			agentsv1beta1.PodMetadata{Labels: map[string]string{"team": "b"}}},
		{"a template without metadata gets the claim's", agentsv1beta1.PodMetadata{},
			agentsv1beta1.PodMetadata{Labels: map[string]string{"tenant": "acme"}, Annotations: map[string]string{"b": "2"}},
			agentsv1beta1.PodMetadata{Labels: map[string]string{"tenant": "acme"}, Annotations: map[string]string{"b": "2"}}},
		{"nothing to add leaves nil maps nil", agentsv1beta1.PodMetadata{}, agentsv1beta1.PodMetadata{}, agentsv1beta1.PodMetadata{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := tc.dst
			mergePodMetadata(&dst, tc.add)
			if d := cmp.Diff(tc.want, dst); d != "" {
				t.Errorf("pod metadata (-want +got):\n%s", d)
			}
		})
	}
}
