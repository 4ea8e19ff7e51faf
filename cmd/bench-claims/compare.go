package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/test/bench"
)

// compareFlags are this command's own flags for a comparison; every other flag is passed on to
// each run of both builds.
var compareFlags = []string{"compare", "compare-harness", "rounds", "out", "runs"}

// The harnesses --compare-harness names.
const (
	harnessThis = "this"
	harnessOwn  = "own"
)

// compare runs the scenario on the build of ref and on this tree's, alternated (ref, this, this,
// ref, …) rounds times each, and prints the medians of both with their ratio. Each run happens in
// its build's tree, so the controller, CRDs and admission measured are that tree's. The harness
// that loads and samples is this tree's for both (harnessThis): a harness change (a sampler
// that scrapes the controller, say) then weighs on both sides alike instead of passing for the
// controller's. harnessOwn runs each tree's own bench-claims.
func compare(ctx context.Context, ref, harness string, rounds int, passOn []string, out string) error {
	if harness != harnessThis && harness != harnessOwn {
		return fmt.Errorf("--compare-harness %q: want %s or %s", harness, harnessThis, harnessOwn)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	base, err := os.MkdirTemp("", "bench-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	tree := filepath.Join(base, "tree")
	if err := run(ctx, root, "git", "worktree", "add", "--detach", tree, ref); err != nil {
		return fmt.Errorf("checking out %s: %w", ref, err)
	}
	defer func() { _ = run(context.Background(), root, "git", "worktree", "remove", "--force", tree) }()
	builds := map[string]string{ref: tree, "this tree": root}
	bins, err := buildHarnesses(ctx, base, builds, harness)
	if err != nil {
		return err
	}
	reports := map[string][]*bench.Report{}
	for i, label := range alternate(ref, "this tree", rounds) {
		dir, err := filepath.Abs(filepath.Join(out, fmt.Sprintf("compare-%02d-%s", i, strings.ReplaceAll(label, " ", "-"))))
		if err != nil {
			return err
		}
		fmt.Printf("== run %d of %d: %s\n", i+1, 2*rounds, label)
		if err := run(ctx, builds[label], bins[label], append(slices.Clone(passOn), "-out", dir)...); err != nil {
			return fmt.Errorf("run %d (%s): %w", i+1, label, err)
		}
		rep, err := readReport(dir)
		if err != nil {
			return err
		}
		reports[label] = append(reports[label], rep)
	}
	printComparison(ref, "this tree", reports[ref], reports["this tree"])
	return nil
}

// buildHarnesses builds the bench-claims each build's runs use: this tree's for all (harnessThis)
// or each tree's own.
func buildHarnesses(ctx context.Context, base string, builds map[string]string, harness string) (map[string]string, error) {
	bins := map[string]string{}
	for label, dir := range builds {
		bins[label] = filepath.Join(base, strings.ReplaceAll(label, " ", "-")+"-bench-claims")
		if harness == harnessThis {
			bins[label] = filepath.Join(base, "bench-claims")
			dir = builds["this tree"]
		}
		if _, built := os.Stat(bins[label]); built == nil {
			continue
		}
		if err := run(ctx, dir, "go", "build", "-o", bins[label], "./cmd/bench-claims"); err != nil {
			return nil, fmt.Errorf("building the bench-claims of %s: %w", label, err)
		}
	}
	return bins, nil
}

// alternate is the order of the runs: a b b a, a b b a, … so neither build always goes first.
func alternate(a, b string, rounds int) []string {
	var order []string
	for i := range rounds {
		if i%2 == 0 {
			order = append(order, a, b)
		} else {
			order = append(order, b, a)
		}
	}
	return order
}

// passedOn drops this command's comparison flags (and their values) from args.
func passedOn(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name := strings.TrimLeft(args[i], "-")
		name, _, hasValue := strings.Cut(name, "=")
		if !slices.Contains(compareFlags, name) {
			out = append(out, args[i])
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++ // its value is the next argument
		}
	}
	return out
}

// readReport reads the report.json a run wrote somewhere under dir.
func readReport(dir string) (*bench.Report, error) {
	found, _ := filepath.Glob(filepath.Join(dir, "*", "report.json"))
	if len(found) != 1 {
		return nil, fmt.Errorf("want one report.json under %s, found %d", dir, len(found))
	}
	data, err := os.ReadFile(found[0])
	if err != nil {
		return nil, err
	}
	rep := &bench.Report{}
	return rep, json.Unmarshal(data, rep)
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stdout, os.Stderr
	return cmd.Run()
}
