package router

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the router's Prometheus series, on a private registry so that nothing else in the
// process (client-go, controller-runtime) leaks series into /metrics. There is deliberately no
// per-sandbox label: it would be unbounded.
type Metrics struct {
	Registry *prometheus.Registry

	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	inflight       prometheus.Gauge
	upstreamErrors *prometheus.CounterVec
	retries        prometheus.Counter
	authDecisions  *prometheus.CounterVec
	wakes          *prometheus.CounterVec
	wakeSeconds    prometheus.Histogram
}

// NewMetrics registers the router's series. cacheSize, when not nil, backs the cache size gauge.
func NewMetrics(cacheSize func() int) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_requests_total",
			Help: "Requests handled on the proxy port, by HTTP status code and method.",
		}, []string{"code", "method"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sandbox_router_request_duration_seconds",
			Help: "Time from request arrival to the end of the response (streams and upgraded connections included), by method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60,
				300, 1800},
		}, []string{"method"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sandbox_router_inflight_requests",
			Help: "Requests and upgraded connections in progress on the proxy port.",
		}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_upstream_errors_total",
			Help: "Failed round trips to sandboxes, by reason (dial, timeout, canceled, other).",
		}, []string{"reason"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sandbox_router_upstream_retries_total",
			Help: "Round trips retried after a dial error.",
		}),
		authDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_auth_decisions_total",
			Help: "Authentication decisions on the proxy port (allowed, denied, error).",
		}, []string{"decision"}),
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
	m.Registry.MustRegister(m.requests, m.duration, m.inflight, m.upstreamErrors, m.retries, m.authDecisions, m.wakes, m.wakeSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cacheSize != nil {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandbox_router_cache_sandboxes",
			Help: "Sandboxes in the router's watch cache.",
		}, func() float64 { return float64(cacheSize()) }))
	}
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
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

func (m *Metrics) upstreamError(reason string) {
	if m != nil {
		m.upstreamErrors.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) retry() {
	if m != nil {
		m.retries.Inc()
	}
}

func (m *Metrics) authDecision(decision string) {
	if m != nil {
		m.authDecisions.WithLabelValues(decision).Inc()
	}
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
