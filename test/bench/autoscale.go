package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
)

// Step is a stretch of claims at one rate.
type Step struct {
	Rate     float64       `json:"ratePerSec"`
	Duration time.Duration `json:"duration"`
}

// AutoscaleConfig is the autoscale scenario: claims whose rate steps through Steps, served once
// by an autoscaled pool (0 to Max members, Headroom seconds of claims) and once by a fixed pool
// of Max members, each on a fresh control plane.
type AutoscaleConfig struct {
	Steps       []Step
	Nodes       int
	DeleteAfter time.Duration // each claim is deleted this long after it has pod IPs (bounds the pods)
	Max         int32         // the autoscaled pool's maxReplicas and the fixed pool's size
	Headroom    int32         // the autoscaled pool's headroomSeconds
	// Window, Stabilization and IdleAfter are the autoscaled pool's window,
	// scaleDownStabilization and scaleToZeroAfter.
	Window, Stabilization, IdleAfter time.Duration
	Settle                           time.Duration
	Dir, RepoRoot                    string
}

// DefaultAutoscale is `--scenario autoscale`: 5 → 50 → 5 claims/s, 30 s each.
func DefaultAutoscale() AutoscaleConfig {
	return AutoscaleConfig{
		Steps: []Step{{5, 30 * time.Second}, {50, 30 * time.Second}, {5, 30 * time.Second}},
		Nodes: 20, DeleteAfter: 5 * time.Second, Max: 200, Headroom: 4,
		Window: 30 * time.Second, Stabilization: 15 * time.Second, IdleAfter: time.Minute, Settle: time.Minute,
	}
}

// AutoscaleRow is one pool's outcome.
type AutoscaleRow struct {
	Pool      string  `json:"pool"`
	Claims    int     `json:"claims"`
	Completed int     `json:"completed"`
	Warm      int     `json:"warm"`
	WarmHit   float64 `json:"warmHitRatio"`
	// PodSeconds is the pool's unclaimed members integrated over the claims' span (sampled every
	// 250 ms): what keeping the pool cost.
	PodSeconds float64  `json:"poolPodSeconds"`
	PodIPs     Latency  `json:"createToPodIPs"`
	Errors     []string `json:"errors,omitempty"`
}

// AutoscaleReport is both rows.
type AutoscaleReport struct {
	Steps []Step         `json:"steps"`
	Rows  []AutoscaleRow `json:"rows"`
}

// RunAutoscale runs the steps against the autoscaled pool, then against the fixed one.
func RunAutoscale(ctx context.Context, cfg AutoscaleConfig) (*AutoscaleReport, error) {
	quietLibraryLogs()
	report := &AutoscaleReport{Steps: cfg.Steps}
	for _, autoscaled := range []bool{true, false} {
		row, err := autoscaleRun(ctx, cfg, autoscaled)
		if err != nil {
			return nil, err
		}
		report.Rows = append(report.Rows, *row)
	}
	return report, nil
}

// autoscaleRun is one pool on a fresh control plane.
func autoscaleRun(ctx context.Context, cfg AutoscaleConfig, autoscaled bool) (*AutoscaleRow, error) {
	name := fmt.Sprintf("fixed %d", cfg.Max)
	if autoscaled {
		name = fmt.Sprintf("autoscaled 0–%d, %d s headroom", cfg.Max, cfg.Headroom)
	}
	dir := filepath.Join(cfg.Dir, map[bool]string{true: "autoscaled", false: "fixed"}[autoscaled])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf("autoscale: %s: starting the control plane with %d kwok nodes (logs in %s)", name, cfg.Nodes, dir)
	bc, err := startBenchCluster(ctx, testenv.Options{ControllerManager: true, Scheduler: true, KwokNodes: cfg.Nodes, DataDir: dir},
		cfg.RepoRoot, "")
	if err != nil {
		return nil, err
	}
	defer bc.stop()
	c, cc := bc.c, bc.cc
	if err := createNamespaceAndTemplate(ctx, c); err != nil {
		return nil, err
	}
	if autoscaled {
		err = c.Create(ctx, autoscaledPool(cfg))
	} else {
		_, err = fillPool(ctx, c, int(cfg.Max))
	}
	if err != nil {
		return nil, err
	}
	rec, stopCache, err := recordClaims(ctx, cc)
	if err != nil {
		return nil, err
	}
	defer stopCache()
	return autoscaleSteps(ctx, cfg, c, cc, rec, name)
}

// autoscaledPool is the scenario's pool with spec.autoscaling, starting empty.
func autoscaledPool(cfg AutoscaleConfig) *extv1beta1.SandboxWarmPool {
	return &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: poolName},
		Spec: extv1beta1.SandboxWarmPoolSpec{Replicas: new(int32(0)), TemplateRef: extv1beta1.SandboxTemplateRef{Name: template},
			Autoscaling: &extv1beta1.SandboxWarmPoolAutoscaling{MinReplicas: new(int32(0)), MaxReplicas: cfg.Max,
				HeadroomSeconds: &cfg.Headroom, Window: &metav1.Duration{Duration: cfg.Window},
				ScaleDownStabilization: &metav1.Duration{Duration: cfg.Stabilization},
				ScaleToZeroAfter:       &metav1.Duration{Duration: cfg.IdleAfter}}},
	}
}

// autoscaleSteps fires the steps one after the other, integrating the pool's members meanwhile,
// and waits for every claim.
func autoscaleSteps(ctx context.Context, cfg AutoscaleConfig, c client.Client, cc cache.Cache, rec *recorder, name string) (*AutoscaleRow, error) {
	total := 0
	for _, s := range cfg.Steps {
		total += int(s.Rate * s.Duration.Seconds())
	}
	rec.expect(total)
	go churn(ctx, c, rec, cfg.DeleteAfter, rec.done)
	held := startPodSeconds(ctx, cc)
	row := &AutoscaleRow{Pool: name, Claims: total}
	for i, s := range cfg.Steps {
		logf("autoscale: %s: %.0f claims/s for %s", name, s.Rate, s.Duration)
		fire(ctx, c, namespace, template, int(s.Rate*s.Duration.Seconds()), s.Rate, fmt.Sprintf("s%d-claim", i), nil, rec)
	}
	row.PodSeconds = held()
	select {
	case <-rec.done:
	case <-time.After(cfg.Settle):
		row.Errors = append(row.Errors, fmt.Sprintf("not every claim got pod IPs within %s of the last send", cfg.Settle))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r := &Report{}
	summarizeClaims(rec, r)
	row.Completed, row.Warm, row.WarmHit, row.PodIPs = r.Completed, r.Warm, r.WarmHitRatio, r.PodIPs
	row.Errors = append(row.Errors, r.Errors...)
	return row, nil
}

// startPodSeconds samples the pool's unclaimed members (ready or starting: each holds a pod)
// every 250 ms from the load generator's cache; the returned func stops and gives the integral.
func startPodSeconds(ctx context.Context, cc cache.Cache) func() float64 {
	var mu sync.Mutex
	total := 0.0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := time.Now()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-tick.C:
			}
			members := &agentsv1beta1.SandboxList{}
			if err := cc.List(ctx, members, client.InNamespace(namespace), client.HasLabels{extv1beta1.WarmPoolLabel}); err != nil {
				continue
			}
			now := time.Now()
			mu.Lock()
			total += float64(len(members.Items)) * now.Sub(last).Seconds()
			mu.Unlock()
			last = now
		}
	}()
	return func() float64 {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return total
	}
}

// Print writes the table: one row per pool.
func (r *AutoscaleReport) Print(w io.Writer) {
	steps := ""
	for i, s := range r.Steps {
		if i > 0 {
			steps += " → "
		}
		steps += fmt.Sprintf("%g/s for %s", s.Rate, s.Duration)
	}
	fmt.Fprintf(w, "claims: %s\n", steps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "pool\tclaims\twarm hits\tpool pod-seconds\tcreate→podIPs p50 ms\tp99 ms")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d/%d\t%.0f%%\t%.0f\t%.1f\t%.1f\n", row.Pool, row.Completed, row.Claims, 100*row.WarmHit,
			row.PodSeconds, row.PodIPs.P50, row.PodIPs.P99)
	}
	_ = tw.Flush()
	for _, row := range r.Rows {
		for _, e := range row.Errors {
			fmt.Fprintf(w, "error (%s): %s\n", row.Pool, e)
		}
	}
}

// WriteJSON writes the report to path.
func (r *AutoscaleReport) WriteJSON(path string) error { return writeJSON(path, r) }
