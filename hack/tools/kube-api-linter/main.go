// Command kube-api-linter runs the Kube API Linter's analyzers (sigs.k8s.io/kube-api-linter) on
// the API types of the packages named; `make lint` runs it on ./api/.... KAL is a golangci-lint
// module plugin, but building a golangci-lint with it (`golangci-lint custom`) fetches sources
// from outside the Go module proxy; this driver builds the same analyzers from KAL's registry
// instead, configured by kal.yaml.
package main

import (
	_ "embed"
	"fmt"
	"os"
	"regexp"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/multichecker"
	"sigs.k8s.io/kube-api-linter/pkg/analysis/registry"
	"sigs.k8s.io/kube-api-linter/pkg/config"
	_ "sigs.k8s.io/kube-api-linter/pkg/registration" // registers every KAL analyzer
	"sigs.k8s.io/yaml"
)

//go:embed kal.yaml
var kalYAML []byte

// settings are kal.yaml: KAL's own golangci-lint settings and the findings left alone.
type settings struct {
	config.GolangCIConfig `json:",inline"`
	Exclusions            []exclusion `json:"exclusions"`
}

// exclusion is a finding that stays: the contract, not a mistake.
type exclusion struct {
	Linter string `json:"linter"`
	File   string `json:"file"` // a suffix of the file's path
	Text   string `json:"text"` // a regular expression the message matches
	Reason string `json:"reason"`
	text   *regexp.Regexp
}

func main() {
	s, err := load(kalYAML)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-api-linter: kal.yaml:", err)
		os.Exit(2)
	}
	analyzers, err := registry.DefaultRegistry().InitializeLinters(s.Linters, s.LintersConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-api-linter: kal.yaml:", err)
		os.Exit(2)
	}
	for i, a := range analyzers {
		analyzers[i] = filtered(a, s.Exclusions)
	}
	multichecker.Main(analyzers...)
}

func load(data []byte) (settings, error) {
	var s settings
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return s, err
	}
	for i := range s.Exclusions {
		e := &s.Exclusions[i]
		if e.Linter == "" || e.File == "" || e.Text == "" || e.Reason == "" {
			return s, fmt.Errorf("exclusion %d: linter, file, text and reason are all required", i)
		}
		var err error
		if e.text, err = regexp.Compile(e.Text); err != nil {
			return s, fmt.Errorf("exclusion %d: %w", i, err)
		}
	}
	return s, nil
}

// filtered reports a's findings in the API types only (files *_types.go: the conversion state
// the webhook keeps in annotations is JSON of ours, not API), less the excluded ones.
func filtered(a *analysis.Analyzer, exclusions []exclusion) *analysis.Analyzer {
	w := *a
	w.Run = func(pass *analysis.Pass) (any, error) {
		p := *pass
		p.Report = func(d analysis.Diagnostic) {
			file := pass.Fset.Position(d.Pos).Filename
			if !strings.HasSuffix(file, "_types.go") {
				return
			}
			for _, e := range exclusions {
				if e.Linter == a.Name && strings.HasSuffix(file, e.File) && e.text.MatchString(d.Message) {
					return
				}
			}
			pass.Report(d)
		}
		return a.Run(&p)
	}
	return &w
}
