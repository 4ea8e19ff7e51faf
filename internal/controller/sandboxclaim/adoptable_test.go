package sandboxclaim

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// A ready, pristine member is adoptable whichever version its owner reference names: members made
// before the upgrade to v1beta1 storage name their pool in v1alpha1.
func TestAdoptableTellsThePoolByGroupAndKind(t *testing.T) {
	cases := []struct {
		apiVersion, kind string
		want             bool
	}{
		{"extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool", true},
		{"extensions.agents.x-k8s.io/v1alpha1", "SandboxWarmPool", true},
		{"extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", false},
		{"example.com/v1", "SandboxWarmPool", false},
	}
	for _, tc := range cases {
		t.Run(tc.apiVersion+" "+tc.kind, func(t *testing.T) {
			sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Generation: 1, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: tc.apiVersion, Kind: tc.kind, Name: "pool", UID: "pool-uid", Controller: new(true)}}}}
			sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue}}
			sb.Status.PodIPs = []string{"10.0.0.1"}
			if got := adoptable(sb); got != tc.want {
				t.Errorf("adoptable = %v, want %v", got, tc.want)
			}
		})
	}
}
