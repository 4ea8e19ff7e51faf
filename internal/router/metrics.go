package router

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agent-sandbox/agent-sandbox/internal/buildinfo"
)

// Metrics are the router's Prometheus series, under upstream sandbox-router's names and labels
// (docs/metrics.md), on a private registry so that nothing else in the process (client-go,
// controller-runtime) leaks series into /metrics. There is deliberately no per-sandbox label: it
// would be unbounded; sandbox_namespace only takes namespaces that hold a Sandbox.
type Metrics struct {
	Registry *prometheus.Registry
	inv      Inventory

	requests         *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	inflight         prometheus.Gauge
	upstreamErrors   *prometheus.CounterVec
	retries          *prometheus.CounterVec
	authzDecisions   *prometheus.CounterVec
	authzUnavailable *prometheus.CounterVec
	wakes            *prometheus.CounterVec
	wakeSeconds      prometheus.Histogram
}

// Inventory is what the metrics read of the router's Sandbox cache.
type Inventory interface {
	// Len is the number of Sandboxes known.
	Len() int
	// HasNamespace: a Sandbox of the namespace is known.
	HasNamespace(ns string) bool
}

// Values of the labels.
const (
	noNamespace   = "-" // sandbox_namespace of a request naming no known namespace
	decisionAllow = "allow"
	decisionDeny  = "deny"
	// codeClientClosed is the code label of a request whose client went away before the answer
	// (nginx's 499), so that a client hanging up never reads as a 5xx of the router.
	codeClientClosed = "499"
)

// NewMetrics registers the router's series. inv, when not nil, backs the cache size gauge and
// bounds sandbox_namespace to the namespaces it knows; nil lets every namespace through (tests).
func NewMetrics(inv Inventory) *Metrics {
	byRequest := []string{"method", "code", "sandbox_namespace"}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		inv:      inv,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_requests_total",
			Help: "Requests handled on the proxy port, by method, status code (499: the client went away first) and Sandbox namespace.",
		}, byRequest),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sandbox_router_request_duration_seconds",
			Help: "Time from request arrival to the end of the response (streams and upgraded connections included), by method, code and Sandbox namespace.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60,
				180, 300, 1800},
		}, byRequest),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sandbox_router_inflight_requests",
			Help: "Requests and upgraded connections in progress on the proxy port.",
		}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_upstream_errors_total",
			Help: "Failed round trips to sandboxes, by Sandbox namespace and reason (dial, timeout, eof, other).",
		}, []string{"sandbox_namespace", "reason"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_upstream_retries_total",
			Help: "Round trips retried after a dial error, by Sandbox namespace.",
		}, []string{"sandbox_namespace"}),
		authzDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_authz_decisions_total",
			Help: "Callers let through (allow) or refused with a 401 or 403 (deny), by Sandbox namespace.",
		}, []string{"sandbox_namespace", "decision"}),
		authzUnavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_authz_unavailable_total",
			Help: "Requests answered 503 because a TokenReview or SubjectAccessReview could not be made, by stage (authentication, authorization).",
		}, []string{"stage"}),
		wakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_wakes_total",
			Help: "Resumes of paused Sandboxes asked on request, by result (resumed; already: another router or a user resumed it first; failed).",
		}, []string{"result"}),
		wakeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sandbox_router_wake_seconds",
			Help:    "Time from a request finding its Sandbox paused to the Sandbox being ready, per request held while it woke.",
			Buckets: []float64{.25, .5, .75, 1, 1.5, 2, 3, 5, 10, 20, 30, 60, 120},
		}),
	}
	m.Registry.MustRegister(m.requests, m.duration, m.inflight, m.upstreamErrors, m.retries, m.authzDecisions,
		m.authzUnavailable, m.wakes, m.wakeSeconds,
		buildinfo.NewCollector("sandbox_router_build_info",
			"The router's build: version, commit, build date, Go version, compiler and platform as labels; always 1."),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if inv != nil {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandbox_router_cache_sandboxes",
			Help: "Sandboxes in the router's watch cache.",
		}, func() float64 { return float64(inv.Len()) }))
	}
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// namespace is the sandbox_namespace label of a namespace a request named.
func (m *Metrics) namespace(ns string) string {
	if ns == "" || (m.inv != nil && !m.inv.HasNamespace(ns)) {
		return noNamespace
	}
	return ns
}

// requestNamespace is the sandbox_namespace label of a request, from its routing headers.
func (m *Metrics) requestNamespace(h http.Header) string {
	route, err := ParseRoute(h)
	if err != nil {
		return noNamespace
	}
	return m.namespace(route.Namespace)
}

func (m *Metrics) wake(result string) {
	if m != nil {
		m.wakes.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) wakeLatency(d time.Duration) {
	if m != nil {
		m.wakeSeconds.Observe(d.Seconds())
	}
}

func (m *Metrics) upstreamError(ns, reason string) {
	if m != nil {
		m.upstreamErrors.WithLabelValues(m.namespace(ns), reason).Inc()
	}
}

func (m *Metrics) retry(ns string) {
	if m != nil {
		m.retries.WithLabelValues(m.namespace(ns)).Inc()
	}
}

// authzDecision counts a caller let through or refused, for the Sandbox its headers name.
func (m *Metrics) authzDecision(h http.Header, decision string) {
	if m != nil {
		m.authzDecisions.WithLabelValues(m.requestNamespace(h), decision).Inc()
	}
}

// unavailable counts a request refused because a review could not be made.
func (m *Metrics) unavailable(stage string) {
	if m != nil {
		m.authzUnavailable.WithLabelValues(stage).Inc()
	}
}

// observeRequest counts and times one finished request.
func (m *Metrics) observeRequest(r *http.Request, code int, elapsed time.Duration) {
	label := codeLabel(code)
	if code >= 500 && errors.Is(r.Context().Err(), context.Canceled) {
		label = codeClientClosed
	}
	method, ns := methodLabel(r.Method), m.requestNamespace(r.Header)
	m.requests.WithLabelValues(method, label, ns).Inc()
	m.duration.WithLabelValues(method, label, ns).Observe(elapsed.Seconds())
}

// statusWriter records the final status code. Flush and full-duplex reach the real writer through
// Unwrap (http.ResponseController); Hijack is implemented here to record the 101 of an upgrade,
// which httputil.ReverseProxy writes on the hijacked connection, not through WriteHeader.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	// 1xx (other than 101) are interim: the final status is still to come.
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, brw, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func codeLabel(code int) string {
	switch code {
	case 200:
		return "200"
	case 400:
		return "400"
	case 401:
		return "401"
	case 404:
		return "404"
	case 502:
		return "502"
	case 503:
		return "503"
	}
	return strconv.Itoa(code)
}

// methodLabel bounds the label's values: clients choose the method string.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}
