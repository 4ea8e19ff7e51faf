package sandboxclaim

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

var (
	claimReadySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agent_sandbox_claim_ready_seconds",
		Help:    "Time from the controller first seeing a SandboxClaim to the claim reporting Ready, by launch type (warm or cold).",
		Buckets: []float64{.005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30, 60, 120},
	}, []string{"launch_type"})
	claimLaunches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_sandbox_claim_launches_total",
		Help: "Sandboxes handed to claims, by launch type; warm / total is the warm-pool hit ratio.",
	}, []string{"launch_type"})
)

func init() {
	metrics.Registry.MustRegister(claimReadySeconds, claimLaunches)
}

func observeLaunch(launch string) { claimLaunches.WithLabelValues(launch).Inc() }

// observeReady records the claim's latency the first time it turns Ready.
func (r *Reconciler) observeReady(before, after *extv1alpha1.SandboxClaim, sb *agentsv1alpha1.Sandbox) {
	if meta.IsStatusConditionTrue(before.Status.Conditions, extv1alpha1.ClaimConditionReady) ||
		!meta.IsStatusConditionTrue(after.Status.Conditions, extv1alpha1.ClaimConditionReady) {
		return
	}
	key := types.NamespacedName{Namespace: after.Namespace, Name: after.Name}
	if v, ok := r.firstSeen.LoadAndDelete(key); ok {
		launch := sb.Labels[extv1alpha1.LaunchTypeLabel]
		if launch == "" {
			launch = "unknown"
		}
		claimReadySeconds.WithLabelValues(launch).Observe(r.clock.Since(v.(time.Time)).Seconds())
	}
}
