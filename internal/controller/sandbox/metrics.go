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

// The memory-keeping pause's costs (docs/snapshots.md): a checkpoint's time and image size at
// each pause, a restore's time (runsc restore, as the wrapper timed it) and the image it read.
var (
	checkpointSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agent_sandbox_checkpoint_seconds",
		Help:    "Time the node agent took to save a KeepMemory Sandbox's memory at a pause.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	})
	checkpointBytes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agent_sandbox_checkpoint_bytes",
		Help:    "Size of the memory images saved at pauses.",
		Buckets: prometheus.ExponentialBuckets(16<<20, 2, 10), // 16 MiB … 8 GiB
	})
	restoreSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agent_sandbox_restore_seconds",
		Help:    "Time runsc took to restore a KeepMemory Sandbox's memory at a resume.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	})
	restoreBytes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agent_sandbox_restore_bytes",
		Help:    "Size of the memory images restored at resumes.",
		Buckets: prometheus.ExponentialBuckets(16<<20, 2, 10),
	})
)

func init() {
	metrics.Registry.MustRegister(checkpointSeconds, checkpointBytes, restoreSeconds, restoreBytes)
}
