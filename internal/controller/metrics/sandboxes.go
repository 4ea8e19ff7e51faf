package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
)

var sandboxesDesc = prometheus.NewDesc("agent_sandboxes",
	"Sandboxes in the cluster now, by namespace, readiness, expiry, launch type, template, owner kind and creating client.",
	[]string{"namespace", "ready_condition", "expired", "launch_type", "sandbox_template", "owned_by", "created_by"}, nil)

var (
	poolLabels       = []string{"namespace", "warmpool", "sandbox_template"}
	poolReplicasDesc = prometheus.NewDesc("agent_sandbox_warmpool_replicas",
		"Sandboxes each SandboxWarmPool is asked to keep ready (spec.replicas).", poolLabels, nil)
	poolReadyDesc = prometheus.NewDesc("agent_sandbox_warmpool_ready_replicas",
		"Ready, unclaimed Sandboxes each SandboxWarmPool holds now.", poolLabels, nil)
	poolAutoscaleDesiredDesc = prometheus.NewDesc("agent_sandbox_warmpool_autoscale_desired_replicas",
		"The size each autoscaled SandboxWarmPool's autoscaler last decided (status.autoscaling.desiredReplicas).", poolLabels, nil)
	poolClaimRateDesc = prometheus.NewDesc("agent_sandbox_warmpool_autoscale_claim_rate",
		"Claims per second each autoscaled SandboxWarmPool served or could have served, over its window (status.autoscaling.observedClaimRate).", poolLabels, nil)
)

// SandboxCollector counts the Sandboxes of the manager's cache at each scrape: a read of memory
// the reconcilers keep anyway, no API call. Only the leader reports, so that a standby replica,
// whose cache is just as full, does not double every sum.
type SandboxCollector struct {
	reader  client.Reader
	elected <-chan struct{}
	log     logr.Logger
}

// NewSandboxCollector counts the Sandboxes reader (a cache) holds once elected is closed.
func NewSandboxCollector(reader client.Reader, elected <-chan struct{}, log logr.Logger) *SandboxCollector {
	return &SandboxCollector{reader: reader, elected: elected, log: log}
}

// RegisterSandboxCollector adds a collector to reg; one is already there when several managers
// share a process (tests), and the first stays.
func RegisterSandboxCollector(reg prometheus.Registerer, c *SandboxCollector) error {
	err := reg.Register(c)
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		return nil
	}
	return err
}

// Describe implements prometheus.Collector.
func (c *SandboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sandboxesDesc
	ch <- poolReplicasDesc
	ch <- poolReadyDesc
	ch <- poolAutoscaleDesiredDesc
	ch <- poolClaimRateDesc
}

// Collect implements prometheus.Collector.
func (c *SandboxCollector) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-c.elected:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &agentsv1beta1.SandboxList{}
	// Read-only and not kept: no copy of every Sandbox per scrape.
	if err := c.reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		c.log.Error(err, "listing Sandboxes for agent_sandboxes")
		return
	}
	pools := &extv1beta1.SandboxWarmPoolList{}
	if err := c.reader.List(ctx, pools, client.UnsafeDisableDeepCopy); err != nil {
		c.log.Error(err, "listing SandboxWarmPools for agent_sandbox_warmpool_*")
		return
	}
	counts := map[[7]string]int{}
	readyMembers := map[types.UID]int{}
	for i := range list.Items {
		sb := &list.Items[i]
		labels := sandboxLabels(sb)
		counts[labels]++
		if ref := metav1.GetControllerOf(sb); labels[ownedByLabel] == "SandboxWarmPool" && labels[readyLabel] == "true" {
			readyMembers[ref.UID]++
		}
	}
	for labels, n := range counts {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), labels[:]...)
	}
	for i := range pools.Items {
		pool := &pools.Items[i]
		labels := []string{pool.Namespace, pool.Name, pool.Spec.TemplateRef.Name}
		ch <- prometheus.MustNewConstMetric(poolReplicasDesc, prometheus.GaugeValue, float64(pool.DesiredReplicas()), labels...)
		ch <- prometheus.MustNewConstMetric(poolReadyDesc, prometheus.GaugeValue, float64(readyMembers[pool.UID]), labels...)
		if a := pool.Status.Autoscaling; a != nil && pool.Spec.Autoscaling != nil {
			ch <- prometheus.MustNewConstMetric(poolAutoscaleDesiredDesc, prometheus.GaugeValue, float64(a.DesiredReplicas), labels...)
			var rate float64
			if a.ObservedClaimRate != nil {
				rate = a.ObservedClaimRate.AsApproximateFloat64()
			}
			ch <- prometheus.MustNewConstMetric(poolClaimRateDesc, prometheus.GaugeValue, rate, labels...)
		}
	}
}

// Indexes of sandboxLabels' result.
const (
	readyLabel   = 1
	ownedByLabel = 5
)

// sandboxLabels are one Sandbox's agent_sandboxes labels, in sandboxesDesc's order.
func sandboxLabels(sb *agentsv1beta1.Sandbox) [7]string {
	ready, expired := "false", "false"
	if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); c != nil {
		if c.Status == metav1.ConditionTrue {
			ready = "true"
		}
		if c.Reason == agentsv1beta1.ReasonExpired {
			expired = "true"
		}
	}
	owner := "None"
	if ref := metav1.GetControllerOf(sb); ref != nil && index.IsClaimOrPool(ref) {
		owner = ref.Kind
	}
	launch := LaunchCold
	if sb.Labels[extv1beta1.LaunchTypeLabel] == LaunchWarm || owner == "SandboxWarmPool" {
		launch = LaunchWarm
	}
	template := sb.Annotations[extv1beta1.TemplateRefAnnotation]
	if template == "" {
		template = "unknown" // a Sandbox created directly, not from a template
	}
	return [7]string{sb.Namespace, ready, expired, launch, template, owner, NormalizeCreatedBy(sb.Labels[CreatedByLabel])}
}
