package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gather is every sample c holds now.
func gather(t *testing.T, c prometheus.Collector) []*dto.Metric {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("registering: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	var out []*dto.Metric
	for _, f := range families {
		out = append(out, f.GetMetric()...)
	}
	return out
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// seriesWithLabel counts c's series whose label name is value.
func seriesWithLabel(t *testing.T, c prometheus.Collector, name, value string) int {
	n := 0
	for _, m := range gather(t, c) {
		if hasLabel(m, name, value) {
			n++
		}
	}
	return n
}

// sumOf is the sum of the histogram c's observations for a template.
func sumOf(t *testing.T, c prometheus.Collector, template string) float64 {
	sum := 0.0
	for _, m := range gather(t, c) {
		if hasLabel(m, "sandbox_template", template) {
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return sum
}

func describe(c prometheus.Collector) string {
	ch := make(chan *prometheus.Desc, 1)
	c.Describe(ch)
	return (<-ch).String()
}
