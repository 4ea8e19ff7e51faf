package sandbox

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/pacer"
)

// While claims are being served, label bookkeeping on a running pod waits for the burst to end;
// a patch that takes the pod out of its NetworkPolicy or makes it pose as the router does not:
// the controller takes it back at once.
func TestDuringAClaimBurstOnlyIsolationLabelsAreTakenBackAtOnce(t *testing.T) {
	cases := []struct {
		name      string
		edit      func(labels map[string]string)
		wantFixed bool
	}{
		{"a label the controller tracks is removed", func(l map[string]string) { delete(l, agentsv1beta1.SandboxNameHashLabel) }, true},
		{"a label the controller tracks is changed", func(l map[string]string) { l[agentsv1beta1.SandboxNameHashLabel] = "00000000" }, true},
		{"the pod poses as the router", func(l map[string]string) { l[agentsv1beta1.RouterPodLabel] = agentsv1beta1.RouterPodLabelValue }, true},
		{"control: a label of the template's is removed (bookkeeping, waits)", func(l map[string]string) { delete(l, "tier") }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pacer.NewPacer(time.Hour, clocktesting.NewFakeClock(epoch))
			done := p.ClaimStarted()
			defer done()
			g := newRig(t, nil, func(o *Options) { o.Gate = pacer.NewGate(p, time.Hour) })
			if err := g.api.Create(t.Context(), aSandbox().PodLabel("tier", "free").Hub()); err != nil {
				t.Fatal(err)
			}
			g.reconcile()
			pod := g.pod()
			want := map[string]string{}
			for k, v := range pod.Labels {
				want[k] = v
			}
			g.update(pod, func() { tc.edit(pod.Labels) })

			g.reconcile()
			got := g.pod().Labels
			fixed := len(got) == len(want)
			for k, v := range want {
				fixed = fixed && got[k] == v
			}
			if fixed != tc.wantFixed {
				t.Errorf("pod labels %v after a reconcile during a claim burst; taken back to %v: %v, want %v", got, want, fixed, tc.wantFixed)
			}
		})
	}
}
