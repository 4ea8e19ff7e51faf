package sandboxd

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
)

// metrics live on a private registry so several Servers (tests, embedding)
// never collide on the global one.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	reqDuration  *prometheus.HistogramVec
	execs        *prometheus.CounterVec
	execDuration *prometheus.HistogramVec
	handler      http.Handler
}

// newMetrics registers the metrics; running counts the background processes.
func newMetrics(running func() int) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_http_requests_total",
			Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		reqDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandboxd_http_request_duration_seconds",
			Help:    "HTTP request duration by route (streams count until they end).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"}),
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_exec_total",
			Help: "Commands run, by mode (buffered, stream, ws, background, legacy) and outcome (ok, error, timeout).",
		}, []string{"mode", "outcome"}),
		execDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandboxd_exec_duration_seconds",
			Help:    "Command run time by mode.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"mode"}),
	}
	m.reg.MustRegister(m.requests, m.reqDuration, m.execs, m.execDuration,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_background_processes_running",
			Help: "Background processes currently running.",
		}, func() float64 { return float64(running()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observeRequest(route, method string, code int, d time.Duration) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		method = "other" // clients choose methods; keep label values bounded
	}
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.reqDuration.WithLabelValues(route).Observe(d.Seconds())
}

func (m *metrics) observeExec(mode string, res process.Result) {
	outcome := "ok"
	switch {
	case res.TimedOut:
		outcome = "timeout"
	case res.ExitCode != 0:
		outcome = "error"
	}
	m.execs.WithLabelValues(mode, outcome).Inc()
	m.execDuration.WithLabelValues(mode).Observe(res.Duration.Seconds())
}
