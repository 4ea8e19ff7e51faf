// Package bench measures claims end to end on a real control plane with simulated nodes:
// client-side latency from create to status.sandbox.podIPs and to Ready, warm-hit ratio,
// achieved rate, API writes per claim for every client (from the API server's audit log), and
// the controller's CPU and memory.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"text/tabwriter"
	"time"
)

// Report is the outcome of one run; it is also written as JSON.
type Report struct {
	Scenario       string             `json:"scenario"`
	Rate           float64            `json:"targetRatePerSec"`
	AchievedRate   float64            `json:"achievedRatePerSec"`
	Duration       string             `json:"duration"`
	Pool           int                `json:"pool"`
	Nodes          int                `json:"nodes"`
	ClaimEnv       int                `json:"claimEnvVars,omitempty"`
	Claims         int                `json:"claims"`
	Completed      int                `json:"completed"`
	Warm           int                `json:"warm"`
	WarmHitRatio   float64            `json:"warmHitRatio"`
	PodIPs         Latency            `json:"createToPodIPs"`
	Ready          Latency            `json:"createToReady"`
	PoolFill       string             `json:"poolFill,omitempty"`
	WritesPerClaim map[string]float64 `json:"writesPerClaimByClient"`
	HotPathWrites  float64            `json:"controllerHotPathWritesPerWarmClaim"`
	RefillWrites   float64            `json:"controllerRefillWritesPerClaim"`
	// ReconcilesPerClaim counts each controller's reconciles during the burst, per completed claim.
	ReconcilesPerClaim map[string]float64 `json:"reconcilesPerClaimByController,omitempty"`
	// MaxQueueDepth is each controller's deepest work queue during the burst (sampled every 250 ms).
	MaxQueueDepth   map[string]float64 `json:"maxWorkQueueDepthByController,omitempty"`
	ControllerRSSMB float64            `json:"controllerRSSMiB"`
	// CPU is what each process on the machine used during the run, by name (loadgen: this one).
	CPU map[string]ProcessCPU `json:"cpu"`
	// FillCPU is the same for the pool fill before the claims; MsPerClaim is per member there.
	FillCPU map[string]ProcessCPU `json:"poolFillCPU,omitempty"`
	// Machine is the whole machine during the burst, with warnings when it was not the bench's alone.
	Machine *Machine `json:"machine,omitempty"`
	Errors  []string `json:"errors,omitempty"`
}

// Latency summarises a set of durations in milliseconds.
type Latency struct {
	P50 float64 `json:"p50ms"`
	P90 float64 `json:"p90ms"`
	P99 float64 `json:"p99ms"`
	Max float64 `json:"maxms"`
	N   int     `json:"n"`
}

func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	sorted := append([]time.Duration(nil), ds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	at := func(q float64) float64 {
		i := int(q*float64(len(sorted))+0.5) - 1
		i = max(0, min(i, len(sorted)-1))
		return ms(sorted[i])
	}
	return Latency{P50: at(.50), P90: at(.90), P99: at(.99), Max: ms(sorted[len(sorted)-1]), N: len(sorted)}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Print writes the human table.
func (r *Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\t%s (pool %d, %d kwok nodes)\n", r.Scenario, r.Pool, r.Nodes)
	if r.ClaimEnv > 0 {
		fmt.Fprintf(tw, "claim env\t%d variables per claim\n", r.ClaimEnv)
	}
	fmt.Fprintf(tw, "claims\t%d sent at %.1f/s (target %.1f/s) over %s, %d completed\n", r.Claims, r.AchievedRate, r.Rate, r.Duration, r.Completed)
	fmt.Fprintf(tw, "warm hits\t%d (%.0f%%)\n", r.Warm, 100*r.WarmHitRatio)
	fmt.Fprintf(tw, "\tp50\tp90\tp99\tmax\n")
	fmt.Fprintf(tw, "create→podIPs (ms)\t%.1f\t%.1f\t%.1f\t%.1f\n", r.PodIPs.P50, r.PodIPs.P90, r.PodIPs.P99, r.PodIPs.Max)
	fmt.Fprintf(tw, "create→Ready (ms)\t%.1f\t%.1f\t%.1f\t%.1f\n", r.Ready.P50, r.Ready.P90, r.Ready.P99, r.Ready.Max)
	clients := make([]string, 0, len(r.WritesPerClaim))
	for c := range r.WritesPerClaim {
		clients = append(clients, c)
	}
	sort.Strings(clients)
	for _, c := range clients {
		fmt.Fprintf(tw, "writes/claim %s\t%.2f\n", c, r.WritesPerClaim[c])
	}
	fmt.Fprintf(tw, "controller hot-path writes/warm claim\t%.2f\n", r.HotPathWrites)
	fmt.Fprintf(tw, "controller refill writes/claim\t%.2f\n", r.RefillWrites)
	for _, name := range slices.Sorted(maps.Keys(r.ReconcilesPerClaim)) {
		fmt.Fprintf(tw, "%s reconciles/claim\t%.1f\n", name, r.ReconcilesPerClaim[name])
	}
	for _, name := range slices.Sorted(maps.Keys(r.MaxQueueDepth)) {
		fmt.Fprintf(tw, "%s work queue, deepest\t%.0f\n", name, r.MaxQueueDepth[name])
	}
	fmt.Fprintf(tw, "controller RSS (MiB)\t%.0f\n", r.ControllerRSSMB)
	printCPU(tw, "CPU during the run\tcores\tms/claim", r.CPU)
	if r.PoolFill != "" {
		fmt.Fprintf(tw, "pool fill\t%s\n", r.PoolFill)
		printCPU(tw, "CPU during the fill\tcores\tms/member", r.FillCPU)
	}
	r.Machine.print(tw)
	for _, e := range r.Errors {
		fmt.Fprintf(tw, "error\t%s\n", e)
	}
	_ = tw.Flush()
}

// printCPU writes a heading and one row per measured process.
func printCPU(w io.Writer, heading string, cpu map[string]ProcessCPU) {
	fmt.Fprintln(w, heading)
	for _, name := range measuredProcesses {
		if p, ok := cpu[name]; ok {
			fmt.Fprintf(w, "  %s\t%.2f\t%.1f\n", name, p.Cores, p.MsPerClaim)
		}
	}
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error { return writeJSON(path, r) }

// writeJSON writes v to path, indented.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
