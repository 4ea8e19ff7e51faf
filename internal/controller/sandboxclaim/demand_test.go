package sandboxclaim

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/autoscale"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// Claims are counted for the pools that served them or could have: what sizes autoscaled pools.
func TestClaimsAreCountedForThePoolsThatCouldServeThem(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := warmPool("pool")
	m1 := warmMember(pool, tmpl, "m1", "10.0.0.1").Hub()
	autoscaled := func(name string) *extv1beta1.SandboxWarmPool {
		return testwrap.MakeWarmPool(ns, name).UID(types.UID(name+"-uid")).Template("python").Autoscaling(0, 5).Hub()
	}
	cases := []struct {
		name    string
		claim   *extv1beta1.SandboxClaim
		pools   []client.Object
		queued  []*agentsv1beta1.Sandbox
		counted map[string]bool // pool -> counted once
	}{
		{"a warm claim counts for the pool it came from", claimOf("c").Hub(),
			[]client.Object{pool, m1}, []*agentsv1beta1.Sandbox{m1}, map[string]bool{"pool": true}},
		{"a claim with no ready member counts for every autoscaled pool of its template",
			claimOf("c").Hub(), []client.Object{pool, autoscaled("a"), autoscaled("b")}, nil,
			map[string]bool{"a": true, "b": true}},
		{"a claim with no ready member that names a pool counts for that pool only",
			claimOf("c").WarmPool("b").Hub(), []client.Object{autoscaled("a"), autoscaled("b")}, nil,
			map[string]bool{"b": true}},
		{"a claim whose warmpool is none counts for no pool",
			claimOf("c").WarmPool("none").Hub(), []client.Object{autoscaled("a")}, nil, map[string]bool{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, append([]client.Object{tmpl, tc.claim}, tc.pools...)...)
			g.r.demand = autoscale.NewDemand(g.clock)
			g.offer(g.r, tc.queued...)
			g.mustReconcile("c")
			for _, name := range []string{"pool", "a", "b"} {
				o := g.r.demand.Observe(types.NamespacedName{Namespace: ns, Name: name}, time.Minute, 0)
				if got := !o.LastClaim.IsZero(); got != tc.counted[name] {
					t.Errorf("pool %s counted a claim: %t, want %t", name, got, tc.counted[name])
				}
			}
		})
	}
}
