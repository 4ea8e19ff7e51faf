package sandbox

import (
	"reflect"
	"testing"

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
