package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	ctrlmetrics "github.com/agent-sandbox/agent-sandbox/internal/controller/metrics"
	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// TestMetricsAsDocumented holds docs/metrics.md, the binaries, the chart and upstream's queries
// to each other: every documented series is exported with its documented labels, every query
// the chart ships reads documented series only, and upstream's queries return data from a scrape
// as the chart's ServiceMonitors have Prometheus make it.
func TestMetricsAsDocumented(t *testing.T) {
	controller := documentedSeries(t, "Controller series")
	routerSeries := documentedSeries(t, "Router series")
	claimsNS := newNamespace(t)
	controllerScrape := controllerAfterClaims(t, claimsNS)
	routerScrape := routerAfterRequests(t)

	t.Run("the controller exports every documented series", func(t *testing.T) {
		checkAsDocumented(t, controller, controllerScrape)
	})
	t.Run("the router exports every documented series", func(t *testing.T) {
		checkAsDocumented(t, routerSeries, routerScrape)
	})
	objs, err := helmTemplate(t, installNamespace, "metrics.prometheusRule.enabled=true",
		"metrics.dashboard.enabled=true", "metrics.serviceMonitor.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	var scraped []series // what Prometheus would hold, scraping as the chart's ServiceMonitors ask
	t.Run("the chart's ServiceMonitors scrape the controller, its webhook and the router", func(t *testing.T) {
		var webhook []*dto.MetricFamily // the webhook container serves controller-runtime's webhook series
		for _, f := range controllerScrape {
			if strings.HasPrefix(f.GetName(), "controller_runtime_webhook_") {
				webhook = append(webhook, f)
			}
		}
		scrapes := map[string][]*dto.MetricFamily{
			"agent-sandbox-controller/metrics":         controllerScrape,
			"agent-sandbox-controller/webhook-metrics": webhook,
			"sandbox-router-svc/metrics":               routerScrape,
		}
		for key, target := range serviceMonitorTargets(t, objs) {
			families, ok := scrapes[key]
			if !ok {
				t.Fatalf("the chart's ServiceMonitors scrape %s, which this test has no scrape for", key)
			}
			delete(scrapes, key)
			scraped = append(scraped, relabel(target, families)...)
		}
		if len(scrapes) > 0 {
			t.Fatalf("the chart's ServiceMonitors do not scrape %v", slices.Collect(maps.Keys(scrapes)))
		}
	})
	t.Run("upstream's dashboard, alert and recipe queries return data", func(t *testing.T) {
		checkQueriesReturnData(t, upstreamQueries(t), scraped,
			strings.NewReplacer("%v", "5m", "${NAMESPACE}", claimsNS, "${WARM_POOL_NAME}", metricsPool))
	})
	t.Run("the chart's alerts and dashboard read documented series only, and return data", func(t *testing.T) {
		known := map[string]bool{"up": true} // Prometheus's own, per target
		for name := range controller {
			known[name] = true
		}
		for name := range routerSeries {
			known[name] = true
		}
		queries := chartQueries(t, objs)
		if len(queries) < 10 {
			t.Fatalf("found %d chart queries, want the PrometheusRule's and the dashboard's: %v", len(queries), queries)
		}
		var cases []promQuery
		for where, expr := range queries {
			names := promQLNames(expr)
			if len(names) == 0 {
				t.Errorf("%s reads no series: %s", where, expr)
			}
			for _, n := range names {
				if !known[seriesOf(n, known)] {
					t.Errorf("%s reads %s, which docs/metrics.md does not list: %s", where, n, expr)
				}
			}
			// The status codes they pick out (a failed conversion, a 5xx) are events.
			cases = append(cases, promQuery{Source: "the chart's " + where, Query: expr, EventLabel: "code"})
		}
		checkQueriesReturnData(t, cases, scraped, strings.NewReplacer("$__rate_interval", "5m"))
	})
}

// metricsPool is the warm pool the warm claim of controllerAfterClaims comes from.
const metricsPool = "pool"

// controllerAfterClaims serves a warm and a cold claim through the shared manager, pauses and
// resumes the warm claim's Sandbox, converts a v1beta1 read through the webhook, and returns
// what the manager's /metrics would serve.
func controllerAfterClaims(t *testing.T, ns string) []*dto.MetricFamily {
	startFakeKubelet(t, ns)
	template := "metrics-" + ns // a template name of its own: the histograms are process-wide
	mustCreateObj(t, testwrap.MakeTemplate(ns, template).Obj(),
		testwrap.MakeWarmPool(ns, metricsPool).Template(template).Replicas(1).Obj())
	testwrap.Eventually(t, "pool ready", poolReady(t, ns, metricsPool, 1))
	// An autoscaled pool of its own template (no claim takes from it) that grows to its
	// minReplicas: the autoscale series.
	mustCreateObj(t, testwrap.MakeTemplate(ns, template+"-auto").Obj(),
		testwrap.MakeWarmPool(ns, "autoscaled").Template(template+"-auto").Replicas(1).Autoscaling(2, 3).Obj())
	testwrap.Eventually(t, "autoscaled pool grown to its minReplicas", poolAutoscaled(ns, "autoscaled", func(p *extv1alpha1.SandboxWarmPool) error {
		if a := p.Status.Autoscaling; p.Spec.Replicas != 2 || a == nil || a.DesiredReplicas != 2 {
			return fmt.Errorf("spec.replicas %d, status.autoscaling %+v: want 2", p.Spec.Replicas, a)
		}
		return nil
	}))

	requested := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	mustCreateObj(t,
		testwrap.MakeClaim(ns, "warm").Template(template).Label(ctrlmetrics.CreatedByLabel, "go-client").
			Annotation(ctrlmetrics.ClientRequestedAtAnnotation, requested).Obj(),
		testwrap.MakeClaim(ns, "cold").Template(template).WarmPool(string(extv1alpha1.WarmPoolPolicyNone)).Obj())
	for _, name := range []string{"warm", "cold"} {
		testwrap.Eventually(t, name+" claim Ready", claimReadyIs(t, ns, name, metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
	}
	startups := func() map[string]uint64 {
		return histogramCounts(t, "agent_sandbox_claim_startup_latency_ms", "sandbox_template", template)
	}
	if got := startups(); got["warm"] != 1 || got["cold"] != 1 {
		t.Fatalf("claim startups recorded by launch type = %v, want one warm and one cold", got)
	}

	// Readiness that comes back is not a second startup.
	warmSandbox := getClaim(t, ns, "warm").Status.SandboxStatus.Name
	for _, replicas := range []int32{0, 1} {
		sb := getSandbox(t, ns, warmSandbox)
		patch := client.MergeFrom(sb.DeepCopy())
		sb.Spec.Replicas = &replicas
		if err := k8s.Patch(context.Background(), sb, patch); err != nil {
			t.Fatal(err)
		}
		want := metav1.ConditionFalse
		if replicas == 1 {
			want = metav1.ConditionTrue
		}
		testwrap.Eventually(t, "warm claim Ready="+string(want), func() error {
			if got := readyStatus(getClaim(t, ns, "warm").Status.Conditions); got != want {
				return fmt.Errorf("Ready=%s", got)
			}
			return nil
		})
	}
	if got := startups(); got["warm"] != 1 {
		t.Errorf("after a pause and resume, warm startups = %d, want still 1", got["warm"])
	}

	// A v1beta1 read goes through the conversion webhook.
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: warmSandbox}, &agentsv1beta1.Sandbox{}); err != nil {
		t.Fatal(err)
	}
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return families
}

func readyStatus(conds []metav1.Condition) metav1.ConditionStatus {
	for _, c := range conds {
		if c.Type == extv1alpha1.ClaimConditionReady {
			return c.Status
		}
	}
	return metav1.ConditionUnknown
}

// histogramCounts are the observation counts of a controller histogram by launch_type, for the
// samples whose label is value.
func histogramCounts(t *testing.T, family, label, value string) map[string]uint64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels[label] == value {
				counts[labels["launch_type"]] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return counts
}

// routerAfterRequests runs a router in process over a Sandbox cache fed by hand — one Sandbox
// that answers, one whose port refuses, one paused that wakes on request — sends it requests
// that are let in, refused, undecidable, failing and waking, and returns its /metrics.
func routerAfterRequests(t *testing.T) []*dto.MetricFamily {
	const ns = "team-metrics"
	port := standIn(t, "hello from")
	refused := closedLocalPort(t)
	cache := router.NewSandboxCache(true)
	cache.OnAdd(testwrap.MakeSandbox(ns, "up").ReadyWith("127.0.0.1").Hub(), true)
	cache.OnAdd(testwrap.MakeSandbox(ns, "down").ReadyWith("127.0.0.1").Hub(), true)
	cache.OnAdd(testwrap.MakeSandbox(ns, "sleepy").Replicas(0).Annotation(agentsv1alpha1.WakeOnRequestAnnotation, "true").
		Condition(metav1.Condition{Type: agentsv1alpha1.SandboxConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1alpha1.ReasonPaused}).Hub(), true)

	m := router.NewMetrics(cache)
	proxy := router.NewProxy(router.ProxyOptions{Resolver: cache, Metrics: m, DialRetries: 1, RetryBackoff: time.Millisecond,
		Waker: acceptingWaker{}, WakeTimeout: 50 * time.Millisecond})
	t.Cleanup(proxy.Close)
	front := httptest.NewServer(router.NewHandler(router.HandlerOptions{Proxy: proxy, Metrics: m,
		Guard: router.GuardOptions{Authenticator: tokenAuthenticator{}}}))
	t.Cleanup(front.Close)

	for _, c := range []struct {
		id, token string
		port      int32
		want      int
	}{
		{"up", "good", port, http.StatusOK},
		{"up", "bad", port, http.StatusUnauthorized},
		{"up", "unavailable", port, http.StatusServiceUnavailable},
		{"down", "good", refused, http.StatusBadGateway},
		{"sleepy", "good", port, http.StatusServiceUnavailable},
	} {
		if code, body := routerCall(front.URL, ns, c.id, c.port, c.token); code != c.want {
			t.Fatalf("%s with token %q: %d %s, want %d", c.id, c.token, code, body, c.want)
		}
	}
	var families []*dto.MetricFamily
	testwrap.Eventually(t, "the wake counted", func() error { // the resume runs beside the request
		var err error
		families, err = m.Registry.Gather()
		if err != nil {
			return err
		}
		for _, f := range families {
			if f.GetName() == "sandbox_router_wakes_total" {
				return nil
			}
		}
		return errors.New("no sandbox_router_wakes_total yet")
	})
	return families
}

// closedLocalPort is a local port nothing listens on.
func closedLocalPort(t *testing.T) int32 {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	srv.Close()
	p, _ := strconv.Atoi(port)
	return int32(p)
}

// tokenAuthenticator knows the token "good", cannot reach its review for "unavailable", and
// refuses the rest.
type tokenAuthenticator struct{}

func (tokenAuthenticator) Authenticate(_ context.Context, token string) (*access.Identity, error) {
	switch token {
	case "good":
		return &access.Identity{}, nil
	case "unavailable":
		return nil, errors.New("the API server is unreachable")
	}
	return nil, access.ErrUnauthenticated
}

// acceptingWaker resumes nothing but says it did.
type acceptingWaker struct{}

func (acceptingWaker) Resume(context.Context, string, string, string) (bool, error) { return true, nil }
