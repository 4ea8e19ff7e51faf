// Command bench-claims measures SandboxClaim latency and cost on a real control plane with
// simulated (kwok) nodes: open-loop claims at a fixed rate, client-side create→podIPs and
// create→Ready, warm-hit ratio, writes per claim for every client, controller CPU and RSS.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/agent-sandbox/agent-sandbox/test/bench"
)

// scenarios are the presets of issue-sized questions; flags override their numbers.
var scenarios = map[string]bench.Config{
	"warm-burst": {Rate: 75, Duration: 10 * time.Second, Pool: 1000, Nodes: 20},
	"cold":       {Rate: 10, Duration: 10 * time.Second, Pool: 0, Nodes: 20},
	"churn":      {Rate: 50, Duration: 20 * time.Second, Pool: 500, Nodes: 20, DeleteAfter: 5 * time.Second},
	"ramp":       {Duration: 10 * time.Second, Pool: 1000, Nodes: 20},
	"scale":      {Rate: 5, Duration: 10 * time.Second, Pool: 10000, Nodes: 100},
	// warm-env: the warm burst with 3 env variables per claim, beside a plain warm burst.
	"warm-env": {Rate: 75, Duration: 10 * time.Second, Pool: 1000, Nodes: 20, ClaimEnv: 3},
}

func main() {
	scenario := flag.String("scenario", "warm-burst", "warm-burst, warm-env (the warm burst with 3 env variables per claim, beside a plain one), cold, churn, ramp (raise the rate until p99 > 1s), scale (10,000 resident sandboxes), autoscale (5 → 50 → 5 claims/s on an autoscaled pool and on a fixed one sized for the peak) or chaos (faults under load; exits 1 when an invariant breaks)")
	rate := flag.Float64("rate", 0, "claims per second (overrides the scenario)")
	duration := flag.Duration("duration", 0, "how long claims are sent (overrides the scenario)")
	pool := flag.Int("pool", -1, "warm pool size (overrides the scenario)")
	nodes := flag.Int("nodes", 0, "simulated nodes (overrides the scenario)")
	deleteAfter := flag.Duration("delete-after", -1, "churn: delete each claim this long after it is ready")
	settle := flag.Duration("settle", 2*time.Minute, "how long to wait for the last claims after sending stops")
	runs := flag.Int("runs", 1, "independent runs (fresh control plane each); the table shows each and the JSON holds all")
	out := flag.String("out", "bin/bench", "folder for the JSON report, logs and profiles")
	memLimit := flag.String("controller-memory-limit", "", "the controller's soft Go memory limit (GOMEMLIMIT, e.g. 230MiB), as a container memory limit sets it in an install")
	profile := flag.Bool("profile", false, "record a CPU profile of the controller during the burst (controller-cpu.pprof)")
	compareRef := flag.String("compare", "", "a git ref (commit, branch, tag) to compare with: its build and this tree's run the scenario alternated, --rounds times each, and the medians are printed with their ratio")
	rounds := flag.Int("rounds", 3, "with --compare: runs of each build")
	harness := flag.String("compare-harness", harnessThis, "with --compare: whose bench harness measures both builds: this (this tree's load generator and samplers run in each tree, so only the controller, CRDs and admission differ) or own (each tree's own bench-claims, for a ref this harness cannot drive)")
	flag.Parse()

	if *compareRef != "" {
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer cancel()
		if err := compare(ctx, *compareRef, *harness, *rounds, passedOn(os.Args[1:]), *out); err != nil {
			fail(err)
		}
		return
	}

	if *scenario == "chaos" {
		os.Exit(runChaos(loadOverrides{*rate, *duration, *pool, *nodes}, *out))
	}
	if *scenario == "autoscale" {
		runAutoscale(*nodes, *settle, *out)
		return
	}
	cfg, ok := scenarios[*scenario]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", *scenario)
		os.Exit(2)
	}
	cfg.Scenario = *scenario
	loadOverrides{*rate, *duration, *pool, *nodes}.apply(&cfg.Rate, &cfg.Duration, &cfg.Pool, &cfg.Nodes)
	if *deleteAfter >= 0 {
		cfg.DeleteAfter = *deleteAfter
	}
	if *memLimit != "" && !goMemLimit.MatchString(*memLimit) {
		fmt.Fprintf(os.Stderr, "--controller-memory-limit %q: want a byte count with an optional unit B, KiB, MiB, GiB or TiB (e.g. 230MiB)\n", *memLimit)
		os.Exit(2)
	}
	cfg.Settle, cfg.Profile, cfg.ControllerMemoryLimit = *settle, *profile, *memLimit
	root, err := os.Getwd()
	if err != nil {
		fail(err)
	}
	cfg.RepoRoot = root
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	rates := []float64{cfg.Rate}
	ramp := *scenario == "ramp" && *rate == 0
	if ramp {
		rates = []float64{10, 25, 50, 75, 100, 150}
	}
	if cfg.ClaimEnv > 0 {
		compareWithPlain(runWithAndWithoutEnv(ctx, cfg, *runs, *out))
		return
	}
	reports := runRates(ctx, cfg, rates, *runs, *out, ramp)
	if *runs > 1 {
		printSpread(reports)
	}
}

// loadOverrides are the load numbers given as flags; zero (a pool of -1) keeps the preset's.
type loadOverrides struct {
	rate        float64
	duration    time.Duration
	pool, nodes int
}

// apply puts the numbers given over a preset's.
func (o loadOverrides) apply(rate *float64, duration *time.Duration, pool, nodes *int) {
	if o.rate > 0 {
		*rate = o.rate
	}
	if o.duration > 0 {
		*duration = o.duration
	}
	if o.pool >= 0 {
		*pool = o.pool
	}
	if o.nodes > 0 {
		*nodes = o.nodes
	}
}

// runRates runs cfg runs times at each rate, printing and saving every report; a ramp stops at
// the first rate whose median p99 crosses 1 s.
func runRates(ctx context.Context, cfg bench.Config, rates []float64, runs int, out string, ramp bool) []*bench.Report {
	var reports []*bench.Report
	for _, r := range rates {
		for i := 0; i < runs; i++ {
			run := cfg
			run.Rate = r
			run.Dir = filepath.Join(out, fmt.Sprintf("%s-%g-%d-%s", cfg.Scenario, r, i, time.Now().Format("150405")))
			reports = append(reports, runOnce(ctx, run))
		}
		if ramp && medianP99(reports[len(reports)-runs:]) > 1000 {
			fmt.Printf("p99 crossed 1 s at %g claims/s\n", r)
			break
		}
	}
	return reports
}

// runWithAndWithoutEnv runs the plain warm burst and the same burst with cfg.ClaimEnv variables
// per claim, alternating, runs times each; it returns the plain reports and those with env.
func runWithAndWithoutEnv(ctx context.Context, cfg bench.Config, runs int, out string) (plain, withEnv []*bench.Report) {
	for i := 0; i < runs; i++ {
		for _, env := range []int{0, cfg.ClaimEnv} {
			run := cfg
			run.ClaimEnv = env
			run.Dir = filepath.Join(out, fmt.Sprintf("%s-env%d-%d-%s", cfg.Scenario, env, i, time.Now().Format("150405")))
			if env == 0 {
				plain = append(plain, runOnce(ctx, run))
			} else {
				withEnv = append(withEnv, runOnce(ctx, run))
			}
		}
	}
	return plain, withEnv
}

// compareWithPlain prints the medians of both kinds of claims side by side, with their ratio.
func compareWithPlain(plain, withEnv []*bench.Report) {
	printComparison("plain", "with env", plain, withEnv)
}

// comparedFigures are the rows of a comparison.
var comparedFigures = []struct {
	name string
	f    func(*bench.Report) float64
}{
	{"create→podIPs p50 ms", func(r *bench.Report) float64 { return r.PodIPs.P50 }},
	{"create→podIPs p99 ms", func(r *bench.Report) float64 { return r.PodIPs.P99 }},
	{"warm hit ratio", func(r *bench.Report) float64 { return r.WarmHitRatio }},
	{"controller hot-path writes/warm claim", func(r *bench.Report) float64 { return r.HotPathWrites }},
	{"kube-apiserver CPU ms/claim", func(r *bench.Report) float64 { return r.CPU["kube-apiserver"].MsPerClaim }},
	{"controller CPU ms/claim", func(r *bench.Report) float64 { return r.CPU["controller"].MsPerClaim }},
	{"etcd CPU ms/claim", func(r *bench.Report) float64 { return r.CPU["etcd"].MsPerClaim }},
	{"kube-apiserver CPU ms/pool member", func(r *bench.Report) float64 { return r.FillCPU["kube-apiserver"].MsPerClaim }},
	{"sandbox reconciles/claim", func(r *bench.Report) float64 { return r.ReconcilesPerClaim["sandbox"] }},
	{"CPU outside the bench, cores", func(r *bench.Report) float64 {
		if r.Machine == nil {
			return 0
		}
		return r.Machine.OutsideCores
	}},
}

// printComparison prints the medians of two sets of runs side by side, with b/a.
func printComparison(aName, bName string, a, b []*bench.Report) {
	printComparedMedians(aName, bName, a, b, "")
	for _, rs := range [][]*bench.Report{a, b} {
		for _, r := range rs {
			if r.Machine != nil && len(r.Machine.Warnings) > 0 {
				fmt.Printf("WARNING (%s run): %s\n", r.Scenario, strings.Join(r.Machine.Warnings, "; "))
			}
		}
	}
	// A run that shared the machine says more about the machine than the build: when both
	// builds have runs that did not, their medians alone are the fairer comparison.
	if ca, cb := quietRuns(a), quietRuns(b); len(ca)+len(cb) < len(a)+len(b) && len(ca) > 0 && len(cb) > 0 {
		fmt.Println()
		printComparedMedians(aName, bName, ca, cb, ", only runs with nothing outside the bench")
	}
}

// quietRuns are the runs the machine sampler raised no warning for.
func quietRuns(rs []*bench.Report) []*bench.Report {
	var out []*bench.Report
	for _, r := range rs {
		if r.Machine == nil || len(r.Machine.Warnings) == 0 {
			out = append(out, r)
		}
	}
	return out
}

// printComparedMedians prints each compared figure's median for both builds and their ratio.
func printComparedMedians(aName, bName string, a, b []*bench.Report, note string) {
	median := func(rs []*bench.Report, f func(*bench.Report) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	fmt.Printf("%-40s %12s %12s %8s  (median of %d and %d runs%s)\n", "", aName, bName, "ratio", len(a), len(b), note)
	for _, m := range comparedFigures {
		ma, mb := median(a, m.f), median(b, m.f)
		ratio := "n/a" // a build whose harness did not measure it
		if ma != 0 && mb != 0 {
			ratio = fmt.Sprintf("%.2f", mb/ma)
		}
		fmt.Printf("%-40s %12.2f %12.2f %8s\n", m.name, ma, mb, ratio)
	}
}

// runOnce runs one benchmark into run.Dir and prints its report.
func runOnce(ctx context.Context, run bench.Config) *bench.Report {
	if err := os.MkdirAll(run.Dir, 0o755); err != nil {
		fail(err)
	}
	rep, err := bench.Run(ctx, run)
	if err != nil {
		fail(err)
	}
	rep.Print(os.Stdout)
	fmt.Println()
	if err := rep.WriteJSON(filepath.Join(run.Dir, "report.json")); err != nil {
		fail(err)
	}
	return rep
}

// goMemLimit is the form GOMEMLIMIT accepts; anything else makes the controller exit at start.
var goMemLimit = regexp.MustCompile(`^[0-9]+(B|KiB|MiB|GiB|TiB)?$`)

func medianP99(rs []*bench.Report) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = r.PodIPs.P99
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// printSpread shows the median and range of the main figures across runs.
func printSpread(rs []*bench.Report) {
	pick := func(f func(*bench.Report) float64) (lo, med, hi float64) {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[0], v[len(v)/2], v[len(v)-1]
	}
	for _, m := range []struct {
		name string
		f    func(*bench.Report) float64
	}{
		{"create→podIPs p50 ms", func(r *bench.Report) float64 { return r.PodIPs.P50 }},
		{"create→podIPs p90 ms", func(r *bench.Report) float64 { return r.PodIPs.P90 }},
		{"create→podIPs p99 ms", func(r *bench.Report) float64 { return r.PodIPs.P99 }},
		{"controller hot-path writes/warm claim", func(r *bench.Report) float64 { return r.HotPathWrites }},
		{"kube-apiserver CPU ms/claim", func(r *bench.Report) float64 { return r.CPU["kube-apiserver"].MsPerClaim }},
		{"controller CPU ms/claim", func(r *bench.Report) float64 { return r.CPU["controller"].MsPerClaim }},
		{"etcd CPU ms/claim", func(r *bench.Report) float64 { return r.CPU["etcd"].MsPerClaim }},
		{"loadgen CPU ms/claim", func(r *bench.Report) float64 { return r.CPU["loadgen"].MsPerClaim }},
		{"controller RSS MiB", func(r *bench.Report) float64 { return r.ControllerRSSMB }},
	} {
		lo, med, hi := pick(m.f)
		fmt.Printf("%-40s median %8.1f  (range %.1f–%.1f over %d runs)\n", m.name, med, lo, hi, len(rs))
	}
}

// runChaos runs the fault-injection scenario; its exit code is 1 when an invariant broke.
func runChaos(load loadOverrides, out string) int {
	cfg := bench.DefaultChaos()
	load.apply(&cfg.Rate, &cfg.Duration, &cfg.Pool, &cfg.Nodes)
	root, err := os.Getwd()
	if err != nil {
		fail(err)
	}
	cfg.RepoRoot = root
	cfg.Dir = filepath.Join(out, "chaos-"+time.Now().Format("150405"))
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		fail(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	rep, err := bench.RunChaos(ctx, cfg)
	if err != nil {
		fail(err)
	}
	rep.Print(os.Stdout)
	if err := rep.WriteJSON(filepath.Join(cfg.Dir, "report.json")); err != nil {
		fail(err)
	}
	if len(rep.Violations()) > 0 {
		return 1
	}
	return 0
}

// runAutoscale runs the autoscale scenario (both pools) and prints and saves its table.
func runAutoscale(nodes int, settle time.Duration, out string) {
	cfg := bench.DefaultAutoscale()
	if nodes > 0 {
		cfg.Nodes = nodes
	}
	cfg.Settle = settle
	root, err := os.Getwd()
	if err != nil {
		fail(err)
	}
	cfg.RepoRoot = root
	cfg.Dir = filepath.Join(out, "autoscale-"+time.Now().Format("150405"))
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	rep, err := bench.RunAutoscale(ctx, cfg)
	if err != nil {
		fail(err)
	}
	rep.Print(os.Stdout)
	if err := rep.WriteJSON(filepath.Join(cfg.Dir, "report.json")); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-claims:", err)
	os.Exit(1)
}
