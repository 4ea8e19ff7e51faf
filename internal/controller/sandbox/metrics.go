package sandbox

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var idlePauses = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "agent_sandbox_idle_pauses_total",
	Help: "Sandboxes the controller paused after their idle timeout (agents.x-k8s.io/idle-timeout).",
})

func init() { metrics.Registry.MustRegister(idlePauses) }
