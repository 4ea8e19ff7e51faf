package router

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
)

// Metrics name every tenant's namespaces and traffic, so /metrics on the probe port answers only
// callers the API server authenticates (TokenReview) and allows get on the non-resource URL
// /metrics (SubjectAccessReview; the ClusterRole agent-sandbox-metrics-reader grants it): the
// filter controller-runtime gives the controller's metrics server, so both answer alike. The
// kubelet's /healthz and /readyz stay open and carry no metrics.

// MetricsFilter wraps the /metrics handler.
type MetricsFilter func(http.Handler) (http.Handler, error)

// MetricsProtector is --metrics-auth's filter over cfg; nil when off.
func (o *Options) MetricsProtector(cfg *rest.Config, log *slog.Logger) (MetricsFilter, error) {
	if !o.MetricsAuth {
		if o.ProbeListen != "" {
			log.Warn("--metrics-auth=false: anyone who reaches the probe port reads the metrics, which name every tenant's namespaces")
		}
		return nil, nil
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("--metrics-auth: %w", err)
	}
	l := logr.FromSlogHandler(log.Handler()).WithName("metrics-auth")
	return func(h http.Handler) (http.Handler, error) { return filter(l, h) }, nil
}
