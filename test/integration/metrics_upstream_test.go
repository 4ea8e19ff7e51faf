package integration

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// installNamespace is where docs/install.md installs the chart, and what upstream's recipes
// name in their namespace matchers.
const installNamespace = "agent-sandbox-system"

// promQuery is a query and where it is written: an entry of testdata/upstream-queries.yaml, or
// one of the chart's.
type promQuery struct {
	Source     string   `json:"source"`
	Also       []string `json:"also"`
	Query      string   `json:"query"`
	EventLabel string   `json:"eventLabel"`
	NoData     string   `json:"noData"`
}

func upstreamQueries(t *testing.T) []promQuery {
	t.Helper()
	var file struct{ Queries []promQuery }
	if err := yaml.UnmarshalStrict(mustRead(t, filepath.Join("testdata", "upstream-queries.yaml")), &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Queries) < 20 {
		t.Fatalf("testdata/upstream-queries.yaml holds %d queries, want upstream's recipes, examples and chart", len(file.Queries))
	}
	for i := range file.Queries {
		file.Queries[i].Source = "upstream's " + file.Queries[i].Source
	}
	return file.Queries
}

// series is one scraped sample's labels, its name under __name__.
type series map[string]string

// checkQueriesReturnData fails for each query that would return no data from these series: a
// query returns data when each of its selectors matches a series.
func checkQueriesReturnData(t *testing.T, queries []promQuery, scraped []series, fill *strings.Replacer) {
	t.Helper()
	for _, q := range queries {
		expr := fill.Replace(q.Query)
		sels := promQLSelectors(expr)
		if len(sels) == 0 {
			t.Errorf("%s: found no selector in %s", q.Source, expr)
			continue
		}
		var empty []string
		var selected []series
		for _, sel := range sels {
			if q.EventLabel != "" {
				sel = labelPresent(sel, q.EventLabel)
			}
			n := len(selected)
			for _, ser := range scraped {
				if sel.matches(ser) {
					selected = append(selected, ser)
				}
			}
			if len(selected) == n {
				empty = append(empty, sel.String()+nearest(sel, scraped))
			}
		}
		// A label it groups by that no selected series carries would fold everything into one.
		for _, label := range groupingLabels(expr) {
			if len(selected) > 0 && !slices.ContainsFunc(selected, func(ser series) bool { _, ok := ser[label]; return ok }) {
				t.Errorf("%s groups by %s, which none of its series carries: %s", q.Source, label, expr)
			}
		}
		switch {
		case q.NoData == "" && len(empty) > 0:
			t.Errorf("%s returns no data from our controller and router: %s\n  selects nothing: %s",
				q.Source, expr, strings.Join(empty, "\n  selects nothing: "))
		case q.NoData != "" && len(empty) == 0:
			t.Errorf("%s is noted as returning no data (%s), yet every selector matches: %s; drop the note",
				q.Source, q.NoData, expr)
		}
	}
}

var groupingClause = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)

// groupingLabels are the labels of expr's by (…) and without (…) clauses.
func groupingLabels(expr string) []string {
	var out []string
	for _, m := range groupingClause.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// labelPresent turns sel's matchers on label into "label is set".
func labelPresent(sel selector, label string) selector {
	out := selector{name: sel.name}
	for _, m := range sel.matchers {
		if m.label == label {
			m = matcher{label: label, op: "=~", value: ".+"}
		}
		out.matchers = append(out.matchers, m)
	}
	return out
}

func (s selector) matches(ser series) bool {
	if s.name != "" && ser["__name__"] != s.name {
		return false
	}
	for _, m := range s.matchers {
		v := ser[m.label]
		switch m.op {
		case "=":
			if v != m.value {
				return false
			}
		case "!=":
			if v == m.value {
				return false
			}
		case "=~", "!~":
			re, err := regexp.Compile("^(?:" + m.value + ")$")
			if err != nil || re.MatchString(v) != (m.op == "=~") {
				return false
			}
		}
	}
	return true
}

// nearest says, for a selector that matches nothing, what the series of its name carry.
func nearest(sel selector, scraped []series) string {
	for _, ser := range scraped {
		if ser["__name__"] == sel.name {
			return fmt.Sprintf(" (a %s series has %v)", sel.name, map[string]string(ser))
		}
	}
	if sel.name != "" {
		return " (no series of that name)"
	}
	return ""
}

// scrapeTarget is one endpoint a ServiceMonitor has Prometheus scrape, with the labels
// Prometheus Operator gives its series.
type scrapeTarget struct {
	labels      map[string]string // job, namespace, service, endpoint, pod, instance
	honorLabels bool
}

// serviceMonitorTargets are the targets the chart's ServiceMonitors select among the chart's
// own Services, keyed "<service>/<port>".
func serviceMonitorTargets(t *testing.T, objs []*unstructured.Unstructured) map[string]scrapeTarget {
	t.Helper()
	targets := map[string]scrapeTarget{}
	for _, sm := range objs {
		if sm.GetKind() != "ServiceMonitor" {
			continue
		}
		match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		namespaces, found, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
		if !found {
			namespaces = []string{sm.GetNamespace()}
		}
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		for _, svc := range objs {
			if svc.GetKind() != "Service" || !slices.Contains(namespaces, svc.GetNamespace()) || !labelsInclude(svc.GetLabels(), match) {
				continue
			}
			ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
			for _, e := range endpoints {
				endpoint := e.(map[string]any)
				for _, p := range ports {
					port := p.(map[string]any)
					if port["name"] != endpoint["port"] {
						continue
					}
					honor, _ := endpoint["honorLabels"].(bool)
					targets[svc.GetName()+"/"+port["name"].(string)] = scrapeTarget{honorLabels: honor, labels: map[string]string{
						"job": svc.GetName(), "namespace": svc.GetNamespace(), "service": svc.GetName(),
						"endpoint": port["name"].(string), "pod": svc.GetName() + "-0",
						"instance": fmt.Sprintf("10.0.0.1:%v", port["port"]),
					}}
				}
			}
		}
	}
	return targets
}

func labelsInclude(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return len(want) > 0
}

// relabel is what Prometheus stores from one target's scrape: every sample's labels with the
// target's added, and the target's up. Without honorLabels a sample's own label that the target
// also sets is kept as exported_<label>.
func relabel(target scrapeTarget, families []*dto.MetricFamily) []series {
	up := series{"__name__": "up"}
	maps.Copy(up, target.labels)
	out := []series{up}
	for _, s := range samples(families) {
		for k, v := range target.labels {
			own, clash := s[k]
			switch {
			case clash && target.honorLabels:
				continue
			case clash:
				s["exported_"+k] = own
			}
			s[k] = v
		}
		out = append(out, s)
	}
	return out
}

// samples are the series of families as the text exposition names them: a histogram's
// _bucket (one per le), _sum and _count, a summary's quantiles, _sum and _count.
func samples(families []*dto.MetricFamily) []series {
	var out []series
	for _, f := range families {
		for _, m := range f.GetMetric() {
			with := func(name string, extra ...string) series {
				s := series{"__name__": name}
				for _, l := range m.GetLabel() {
					s[l.GetName()] = l.GetValue()
				}
				for i := 0; i+1 < len(extra); i += 2 {
					s[extra[i]] = extra[i+1]
				}
				return s
			}
			name := f.GetName()
			switch {
			case m.GetHistogram() != nil:
				for _, b := range m.GetHistogram().GetBucket() {
					out = append(out, with(name+"_bucket", "le", formatFloat(b.GetUpperBound())))
				}
				out = append(out, with(name+"_bucket", "le", "+Inf"), with(name+"_sum"), with(name+"_count"))
			case m.GetSummary() != nil:
				for _, q := range m.GetSummary().GetQuantile() {
					out = append(out, with(name, "quantile", formatFloat(q.GetQuantile())))
				}
				out = append(out, with(name+"_sum"), with(name+"_count"))
			default:
				out = append(out, with(name))
			}
		}
	}
	return out
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func TestMetricsPromQLSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{`up{}`}},
		{`histogram_quantile(0.99, sum(rate(x_bucket{}[%v])) by (le))`, []string{`x_bucket{}`}},
		{`sum by (le, launch_type) (rate(x_bucket{job="a",code!="200"}[5m]))`, []string{`x_bucket{job="a",code!="200"}`}},
		{`sum(rate(x{ns="${NAMESPACE}", pool='p'}[1m]) >= 0) or vector(0)`, []string{`x{ns="${NAMESPACE}",pool="p"}`}},
		{`a{code=~"5.."} / b{v!~"{x}"} > 0.05 and c`, []string{`a{code=~"5.."}`, `b{v!~"{x}"}`, `c{}`}},
		{`min(time() - process_start_time_seconds{namespace="s"})`, []string{`process_start_time_seconds{namespace="s"}`}},
		{`max_over_time((sum(irate(x_count[5m])) by (a, b))[%v:5s])`, []string{`x_count{}`}},
		{`{__name__="x"} offset 5m`, []string{`{__name__="x"}`}},
		{`x{y~"z"}`, []string{`x{__unreadable__="y~\"z\""}`}},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			var got []string
			for _, s := range promQLSelectors(tc.expr) {
				got = append(got, s.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("selectors of %s = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}

func TestMetricsRelabel(t *testing.T) {
	target := map[string]string{"namespace": "system", "job": "ctl"}
	family := []*dto.MetricFamily{{Name: new("x"), Metric: []*dto.Metric{{Label: []*dto.LabelPair{
		{Name: new("namespace"), Value: new("team")}}, Untyped: &dto.Untyped{}}}}}
	for _, tc := range []struct {
		name  string
		honor bool
		want  series
	}{
		{"a sample's clashing label is kept as exported_ and the target's set", false,
			series{"__name__": "x", "namespace": "system", "exported_namespace": "team", "job": "ctl"}},
		{"with honorLabels the sample's own label wins", true,
			series{"__name__": "x", "namespace": "team", "job": "ctl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := relabel(scrapeTarget{labels: target, honorLabels: tc.honor}, family)
			wantUp := series{"__name__": "up", "namespace": "system", "job": "ctl"}
			if len(got) != 2 || !maps.Equal(got[0], wantUp) || !maps.Equal(got[1], tc.want) {
				t.Errorf("relabel = %v, want [%v %v]", got, wantUp, tc.want)
			}
		})
	}
}
