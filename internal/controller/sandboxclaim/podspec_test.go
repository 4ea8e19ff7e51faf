package sandboxclaim

import (
	"errors"
	"strings"
	"testing"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/podmeta"
)

func TestValidatePodMetadata(t *testing.T) {
	gateway := podmeta.Rules{RouterLabels: map[string]string{"role": "gateway"}}
	cases := []struct {
		name    string
		rules   podmeta.Rules
		md      agentsv1beta1.PodMetadata
		wantSub string // "" means valid
	}{
		{"open labels and annotations", podmeta.Rules{},
			agentsv1beta1.PodMetadata{Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"example.com/x": "y"}}, ""},
		{"the installation's own router label (beyond what CEL knows)", gateway,
			agentsv1beta1.PodMetadata{Labels: map[string]string{"role": "gateway"}}, "label role=gateway identifies the sandbox router"},
		{"the same key with another value", gateway,
			agentsv1beta1.PodMetadata{Labels: map[string]string{"role": "worker"}}, ""},
		{"a reserved label", podmeta.Rules{},
			agentsv1beta1.PodMetadata{Labels: map[string]string{"agents.x-k8s.io/warm-pool-sandbox": "x"}}, `label key "agents.x-k8s.io/warm-pool-sandbox" is in a reserved domain`},
		{"a bad label value", podmeta.Rules{},
			agentsv1beta1.PodMetadata{Labels: map[string]string{"team": strings.Repeat("a", 64)}}, "must be no more than 63 characters"},
		{"a bad annotation key", podmeta.Rules{},
			agentsv1beta1.PodMetadata{Annotations: map[string]string{"bad key": "v"}}, `annotation key "bad key"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := validatePodMetadata(c.md, c.rules)
			if c.wantSub == "" {
				if err != nil {
					t.Fatalf("err = %v, want valid", err)
				}
				return
			}
			var ue *userError
			if !errors.As(err, &ue) || ue.reason != extv1beta1.ReasonInvalidMetadata || !strings.Contains(ue.Error(), c.wantSub) {
				t.Fatalf("err = %v, want an %s user error containing %q", err, extv1beta1.ReasonInvalidMetadata, c.wantSub)
			}
		})
	}
}
