// Package metrics holds the controller's Prometheus series under the names, labels and units
// of upstream agent-sandbox, so that dashboards and alerts written for upstream work against
// ours (docs/metrics.md maps every series).
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agent-sandbox/agent-sandbox/internal/buildinfo"
)

// The metrics server serves only callers the API server allows get on /metrics (--metrics-auth):
// it reviews the scraper's token and asks whether it may.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Values of the launch_type label.
const (
	LaunchWarm    = "warm"    // adopted from a warm pool
	LaunchCold    = "cold"    // created from the template
	LaunchUnknown = "unknown" // the claim's Sandbox could not be told
)

// Keys upstream's clients and controller put on claims and Sandboxes.
const (
	// ClientRequestedAtAnnotation is when the client asked for the claim (RFC 3339, nanoseconds),
	// set by upstream's SDKs; it feeds agent_sandbox_client_claim_startup_latency_ms.
	ClientRequestedAtAnnotation = "agents.x-k8s.io/client-first-requested-at"
	// CreatedByLabel names the kind of client that created a claim or Sandbox.
	CreatedByLabel = "agents.x-k8s.io/created-by"
)

// latencyBucketsMs are upstream's buckets (100 ms … 4 min) with finer ones below 100 ms, where
// warm claims land; quantiles over either set of buckets read the same way.
var latencyBucketsMs = []float64{10, 25, 50, 100, 250, 500, 750, 1000, 1250, 1500, 2000, 2500, 5000,
	10000, 30000, 60000, 120000, 240000}

var (
	claimStartup = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agent_sandbox_claim_startup_latency_ms",
		Help:    "Milliseconds from a SandboxClaim's creation to its first Ready, by launch type and template.",
		Buckets: latencyBucketsMs,
	}, []string{"launch_type", "sandbox_template"})
	claimControllerStartup = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agent_sandbox_claim_controller_startup_latency_ms",
		Help:    "Milliseconds from the controller first seeing a SandboxClaim to its first Ready, by launch type and template.",
		Buckets: latencyBucketsMs,
	}, []string{"launch_type", "sandbox_template"})
	clientClaimStartup = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agent_sandbox_client_claim_startup_latency_ms",
		Help: "Milliseconds from the client's request (annotation " + ClientRequestedAtAnnotation +
			") to the claim's first Ready, by launch type and template; subject to clock skew between client and controller.",
		Buckets: latencyBucketsMs,
	}, []string{"launch_type", "sandbox_template"})
	sandboxCreation = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agent_sandbox_creation_latency_ms",
		Help: "Milliseconds from a claimed Sandbox's creation to its Ready condition, recorded at the claim's first Ready; " +
			"for warm launches the Sandbox was made ahead of the claim.",
		Buckets: []float64{50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 240000, 300000, 600000},
	}, []string{"namespace", "launch_type", "sandbox_template"})
	claimCreation = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_sandbox_claim_creation_total",
		Help: "Sandboxes handed to SandboxClaims, by namespace, template, launch type, warm pool, whether the Sandbox was ready then, and creating client; warm / all is the warm-pool hit ratio.",
	}, []string{"namespace", "sandbox_template", "launch_type", "warmpool_name", "pod_condition", "created_by"})
)

func init() {
	crmetrics.Registry.MustRegister(claimStartup, claimControllerStartup, clientClaimStartup, sandboxCreation, claimCreation,
		buildinfo.NewCollector("agent_sandbox_build_info",
			"The controller's build: version, commit, build date, Go version, compiler and platform as labels; always 1."))
}

// NormalizeCreatedBy bounds the created_by label to the clients upstream names.
func NormalizeCreatedBy(v string) string {
	switch v {
	case "go-client", "python-client", "controller":
		return v
	}
	return "unknown"
}

// Launch is a Sandbox handed to a claim.
type Launch struct {
	Namespace, Template, Type string
	// WarmPool is the pool a warm Sandbox came from, or the pool a cold claim asked for.
	WarmPool string
	// SandboxReady: the Sandbox was Ready when it was handed over.
	SandboxReady bool
	// CreatedBy is the claim's CreatedByLabel.
	CreatedBy string
}

// RecordLaunch counts one Sandbox handed to a claim.
func RecordLaunch(l Launch) {
	cond := "not_ready"
	if l.SandboxReady {
		cond = "ready"
	}
	claimCreation.WithLabelValues(l.Namespace, l.Template, l.Type, l.WarmPool, cond, NormalizeCreatedBy(l.CreatedBy)).Inc()
}

// FirstReady is what is known of a claim when it first turns Ready.
type FirstReady struct {
	LaunchType, Template string
	Now                  time.Time
	// ClaimCreated is the claim's creationTimestamp, whole seconds.
	ClaimCreated time.Time
	// FirstSeen is when this controller first saw the claim (zero: not known).
	FirstSeen time.Time
	// ClientRequestedAt is the claim's ClientRequestedAtAnnotation ("" when absent).
	ClientRequestedAt string
	// SandboxNamespace, SandboxCreated and SandboxReady describe the claim's Sandbox (zero
	// times: not known).
	SandboxNamespace             string
	SandboxCreated, SandboxReady time.Time
}

// RecordFirstReady records a claim's startup latencies; call it once per claim.
func RecordFirstReady(f FirstReady) {
	observeMs(claimStartup, f.Now.Sub(creationEstimate(f.ClaimCreated, f.FirstSeen)), f.LaunchType, f.Template)
	if !f.FirstSeen.IsZero() {
		observeMs(claimControllerStartup, f.Now.Sub(f.FirstSeen), f.LaunchType, f.Template)
	}
	if f.ClientRequestedAt != "" {
		if at, err := time.Parse(time.RFC3339Nano, f.ClientRequestedAt); err == nil {
			observeMs(clientClaimStartup, f.Now.Sub(at), f.LaunchType, f.Template)
		}
	}
	if !f.SandboxCreated.IsZero() && !f.SandboxReady.IsZero() {
		observeMs(sandboxCreation, f.SandboxReady.Sub(f.SandboxCreated), f.SandboxNamespace, f.LaunchType, f.Template)
	}
}

// creationEstimate is the latest instant the claim can have been created at: its
// creationTimestamp only has whole seconds, and the controller cannot have seen the claim before
// it existed. Without it a warm claim's tens of milliseconds would read as up to a second.
func creationEstimate(created, firstSeen time.Time) time.Time {
	if firstSeen.IsZero() || firstSeen.Before(created) {
		return created
	}
	return minTime(created.Add(time.Second), firstSeen)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// observeMs records d in milliseconds; a negative d (clock skew) is dropped, not clamped, and
// makes no series.
func observeMs(h *prometheus.HistogramVec, d time.Duration, labels ...string) {
	if d >= 0 {
		h.WithLabelValues(labels...).Observe(float64(d) / float64(time.Millisecond))
	}
}

// autoscaleChanges counts the sizes the autoscaler set, by pool and direction.
var autoscaleChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "agent_sandbox_warmpool_autoscale_changes_total",
	Help: "Times the autoscaler changed a SandboxWarmPool's spec.replicas, by namespace, pool and direction (up or down).",
}, []string{"namespace", "warmpool", "direction"})

func init() { crmetrics.Registry.MustRegister(autoscaleChanges) }

// RecordAutoscale counts one change of a pool's size by its autoscaler.
func RecordAutoscale(namespace, pool string, up bool) {
	direction := "down"
	if up {
		direction = "up"
	}
	autoscaleChanges.WithLabelValues(namespace, pool, direction).Inc()
}
