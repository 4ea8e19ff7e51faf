package integration

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
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

// promQLNames are the series names a PromQL expression reads.
func promQLNames(expr string) []string {
	var names []string
	for _, sel := range promQLSelectors(expr) {
		if sel.name != "" {
			names = append(names, sel.name)
		}
	}
	return names
}

// selector is one vector selector of a PromQL expression: a series name (empty when the
// selector has none) and its label matchers.
type selector struct {
	name     string
	matchers []matcher
}

// matcher is one label matcher: label, operator (=, !=, =~, !~) and value.
type matcher struct{ label, op, value string }

func (s selector) String() string {
	var parts []string
	for _, m := range s.matchers {
		parts = append(parts, m.label+m.op+strconv.Quote(m.value))
	}
	return s.name + "{" + strings.Join(parts, ",") + "}"
}

var (
	// A matcher block (whose values may hold braces) or a string outside one.
	promQLBlockOrString = regexp.MustCompile(`\{(?:[^}"']|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')*\}|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promQLNoise         = []*regexp.Regexp{
		regexp.MustCompile(`\[[^\]]*\]`), // ranges and subqueries
		regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`), // grouping label lists
		regexp.MustCompile(`\b[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(`),                                 // function calls
		regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:])[0-9][0-9a-zA-Z.]*`),                          // numbers, durations
	}
	promQLSelector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*(\{\})?`)
	promQLMatcher  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*(?:,|$)`)
	promQLKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"Inf": true, "NaN": true, "inf": true, "nan": true}
)

// promQLSelectors are the vector selectors of a PromQL expression: what is left once strings,
// ranges, grouping clauses, function names, keywords and numbers are taken out. It covers the
// PromQL of our chart and of upstream's recipes and examples (the Prometheus parser would
// pull newer k8s.io modules into go.mod); it fails loudly on a matcher it cannot read.
func promQLSelectors(expr string) []selector {
	var blocks []string // every {…} in order, each left in expr as an empty {}
	expr = promQLBlockOrString.ReplaceAllStringFunc(expr, func(m string) string {
		if m[0] != '{' {
			return " "
		}
		blocks = append(blocks, m[1:len(m)-1])
		return "{}"
	})
	for _, re := range promQLNoise {
		expr = re.ReplaceAllString(expr, " ")
	}
	var out []selector
	next := 0
	for _, m := range promQLSelector.FindAllStringSubmatch(expr, -1) {
		name, hasBlock := m[1], m[2] != ""
		if promQLKeywords[name] {
			name = ""
		}
		if name == "" && !hasBlock {
			continue
		}
		sel := selector{name: name}
		if hasBlock {
			sel.matchers = parseMatchers(blocks[next])
			next++
		}
		out = append(out, sel)
	}
	return out
}

// parseMatchers reads the inside of a matcher block; a matcher it cannot read becomes one that
// matches nothing, so that the query's check fails and names it.
func parseMatchers(block string) []matcher {
	var out []matcher
	for rest := strings.TrimSpace(block); rest != ""; {
		m := promQLMatcher.FindStringSubmatch(rest)
		if m == nil {
			return append(out, matcher{label: "__unreadable__", op: "=", value: rest})
		}
		value := m[3]
		if value[0] == '\'' {
			value = `"` + strings.ReplaceAll(value[1:len(value)-1], `"`, `\"`) + `"`
		}
		unquoted, err := strconv.Unquote(value)
		if err != nil {
			return append(out, matcher{label: "__unreadable__", op: "=", value: rest})
		}
		out = append(out, matcher{label: m[1], op: m[2], value: unquoted})
		rest = strings.TrimSpace(rest[len(m[0]):])
	}
	return out
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
