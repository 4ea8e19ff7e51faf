package sandbox

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// The API contract: serviceFQDN's "domain defaults to cluster.local but is configurable via the
// controller's --cluster-domain flag" (manager.Options.ClusterDomain → Options.ClusterDomain).
func TestServiceFQDNFollowsTheClusterDomain(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", Namespace: "team-a"}}
	cases := []struct {
		name          string
		clusterDomain string
		service       *corev1.Service
		want          string
	}{
		{"unset: cluster.local", "", svc, "agent-1.team-a.svc.cluster.local"},
		{"configured", "corp.example", svc, "agent-1.team-a.svc.corp.example"},
		{"no service yet: empty", "corp.example", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := New(nil, nil, Options{ClusterDomain: tc.clusterDomain})
			sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", Namespace: "team-a"}}
			setStatus(sb, observed{service: tc.service}, nil, r.clusterDomain)
			if sb.Status.ServiceFQDN != tc.want {
				t.Errorf("serviceFQDN = %q, want %q", sb.Status.ServiceFQDN, tc.want)
			}
		})
	}
}
