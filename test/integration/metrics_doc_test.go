package integration

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// documentedSeries reads a "## <section>" table of docs/metrics.md: series name -> label names,
// sorted.
func documentedSeries(t *testing.T, section string) map[string][]string {
	t.Helper()
	doc := string(mustRead(t, filepath.Join(repoRoot, "docs/metrics.md")))
	start := strings.Index(doc, "\n## "+section+"\n")
	if start < 0 {
		t.Fatalf("docs/metrics.md has no section %q", section)
	}
	body := doc[start+1:]
	if end := strings.Index(body[3:], "\n## "); end >= 0 {
		body = body[:end+3]
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| [a-z]+ \\| (.*) \\|$")
	name := regexp.MustCompile("`([a-z_]+)`")
	series := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(body, -1) {
		labels := []string{}
		for _, l := range name.FindAllStringSubmatch(m[2], -1) {
			labels = append(labels, l[1])
		}
		sort.Strings(labels)
		series[m[1]] = labels
	}
	if len(series) == 0 {
		t.Fatalf("docs/metrics.md section %q lists no series", section)
	}
	return series
}

// checkAsDocumented fails for each documented series that families lack, or whose samples carry
// other labels than documented.
func checkAsDocumented(t *testing.T, documented map[string][]string, families []*dto.MetricFamily) {
	t.Helper()
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}
	for name, want := range documented {
		f, ok := byName[name]
		if !ok || len(f.GetMetric()) == 0 {
			t.Errorf("%s is documented but not exported", name)
			continue
		}
		for _, m := range f.GetMetric() {
			got := []string{}
			for _, l := range m.GetLabel() {
				got = append(got, l.GetName())
			}
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s has labels %v, documented %v", name, got, want)
				break
			}
		}
	}
}

// promQLNames are the series names a PromQL expression reads: what is left once strings, label
// matchers, ranges, grouping clauses, functions, keywords and numbers are taken out. The
// expressions are ours (chart, dashboard), so this covers the PromQL they use.
func promQLNames(expr string) []string {
	for _, re := range []string{
		`"(?:[^"\\]|\\.)*"`, `'(?:[^'\\]|\\.)*'`, // strings
		`\{[^}]*\}`, `\[[^\]]*\]`, // label matchers, ranges
		`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`, // grouping label lists
		`\b[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(`,                                 // function calls
	} {
		expr = regexp.MustCompile(re).ReplaceAllString(expr, " ")
	}
	keywords := map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	var names []string
	for _, id := range regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`).FindAllString(expr, -1) {
		if !keywords[id] && !regexp.MustCompile(`^[eE]$|^(Inf|NaN)$`).MatchString(id) {
			names = append(names, id)
		}
	}
	return names
}

// seriesOf is the exported series a sample name belongs to (a histogram's _bucket, _sum and
// _count are its own).
func seriesOf(name string, known map[string]bool) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && known[base] {
			return base
		}
	}
	return name
}

// chartQueries are the PromQL expressions of the chart's PrometheusRule and Grafana dashboard,
// by where they are.
func chartQueries(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	queries := map[string]string{}
	for _, o := range objs {
		switch o.GetKind() {
		case "PrometheusRule":
			groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
			for _, g := range groups {
				rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, r := range rules {
					rule := r.(map[string]any)
					queries["alert "+rule["alert"].(string)] = rule["expr"].(string)
				}
			}
		case "ConfigMap":
			data, ok, _ := unstructured.NestedString(o.Object, "data", "agent-sandbox.json")
			if !ok {
				continue
			}
			var dashboard struct {
				Panels []struct {
					Title   string
					Targets []struct{ Expr string }
				}
			}
			if err := json.Unmarshal([]byte(data), &dashboard); err != nil {
				t.Fatalf("the dashboard is not JSON: %v", err)
			}
			for _, p := range dashboard.Panels {
				for i, target := range p.Targets {
					queries["panel "+p.Title+" #"+string(rune('A'+i))] = target.Expr
				}
			}
		}
	}
	return queries
}
