package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// ChaosReport is what a chaos run found; Violations lists the broken invariants.
type ChaosReport struct {
	Config               string             `json:"config"`
	Claims               int                `json:"claims"`
	CreateErrors         int                `json:"createErrors"` // refused while the API server was down
	Faults               []Fault            `json:"faults"`
	ControllerProcesses  int                `json:"controllerProcessesStarted"`
	Ready                int                `json:"readyClaims"`
	Lost                 int                `json:"lost"`
	LostClaims           []string           `json:"lostClaims"` // the first 20
	WorstClaimLatency    string             `json:"worstCreateToPodIPs"`
	AllReadyAfterFault   string             `json:"allReadyAfterLastFault"`
	DoubleOwnedSandboxes []string           `json:"doubleOwnedSandboxes"`
	DoubleBoundClaims    []string           `json:"doubleBoundClaims"`
	PoolRestored         string             `json:"poolBackAtSizeAfterLastFault"`
	Leaks                map[string]int     `json:"leaks"`
	WritesPerClaim       map[string]float64 `json:"writesPerClaimByClient"`
	// NodeAgentResyncs counts the pods the harness nudged because kwok dropped their status
	// write (nodeAgentResync): a fault of the simulated node that a kubelet would retry.
	NodeAgentResyncs int      `json:"nodeAgentResyncs"`
	Errors           []string `json:"errors,omitempty"`
}

// judgeClaims finds lost claims: existing claims without pod IPs by recovery after the last
// fault or after their own creation, whichever is later. readyNow is what the API server said
// right at the end (a watch that is still catching up after an API server restart must not
// make a ready claim look lost).
func (r *ChaosReport) judgeClaims(rec *recorder, readyNow map[string]bool, lastFault time.Time, recovery time.Duration) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var worst, lastReady time.Duration
	for name, c := range rec.claims {
		if c.err != nil && !c.seen && !readyNow[name] {
			r.CreateErrors++
			continue
		}
		r.Claims++
		from := c.sent
		if lastFault.After(from) {
			from = lastFault
		}
		switch {
		case !c.podIPs.IsZero() && !c.podIPs.After(from.Add(recovery)):
			worst = max(worst, c.podIPs.Sub(c.sent))
			lastReady = max(lastReady, c.podIPs.Sub(lastFault))
		case c.podIPs.IsZero() && readyNow[name]:
			// Ready by the deadline on the API server; the watch had not shown it yet.
		default:
			r.Lost++
			if len(r.LostClaims) < 20 {
				r.LostClaims = append(r.LostClaims, name)
			}
			continue
		}
		r.Ready++
	}
	r.WorstClaimLatency = worst.Round(time.Millisecond).String()
	r.AllReadyAfterFault = lastReady.Round(time.Millisecond).String()
}

// countWrites attributes the run's writes to their clients, per claim.
func (r *ChaosReport) countWrites(path string, from, to time.Time) {
	events, err := readAudit(path, from, to)
	if err != nil {
		r.Errors = append(r.Errors, "audit log: "+err.Error())
		return
	}
	r.WritesPerClaim = map[string]float64{}
	if r.Claims == 0 {
		return
	}
	for _, e := range events {
		if e.ObjectRef.Namespace == namespace || e.ObjectRef.Resource == "bindings" {
			r.WritesPerClaim[strings.TrimPrefix(e.User.Username, "system:")] += 1 / float64(r.Claims)
		}
	}
}

// Violations lists every broken invariant; empty means the run passed.
func (r *ChaosReport) Violations() []string {
	var v []string
	if len(r.DoubleOwnedSandboxes) > 0 {
		v = append(v, fmt.Sprintf("%d Sandboxes owned by two claims: %v", len(r.DoubleOwnedSandboxes), r.DoubleOwnedSandboxes))
	}
	if len(r.DoubleBoundClaims) > 0 {
		v = append(v, fmt.Sprintf("%d claims bound to two Sandboxes: %v", len(r.DoubleBoundClaims), r.DoubleBoundClaims))
	}
	if r.Lost > 0 {
		v = append(v, fmt.Sprintf("%d claims lost (not ready in time), e.g. %v", r.Lost, r.LostClaims))
	}
	if n := total(r.Leaks); n != 0 || unknown(r.Leaks) {
		v = append(v, fmt.Sprintf("leaked objects after cleanup: %v", r.Leaks))
	}
	if strings.HasPrefix(r.PoolRestored, "not back") {
		v = append(v, "pool "+r.PoolRestored)
	}
	if r.Claims == 0 {
		v = append(v, "no claim was created")
	}
	return v
}

// Print writes the report as a human reads it.
func (r *ChaosReport) Print(w io.Writer) {
	fmt.Fprintf(w, "chaos: %s\n", r.Config)
	kinds := map[string]int{}
	for _, f := range r.Faults {
		kinds[f.Kind]++
	}
	fmt.Fprintf(w, "  faults injected        %v (controller processes started: %d)\n", kinds, r.ControllerProcesses)
	fmt.Fprintf(w, "  claims                 %d created, %d ready in time, %d create calls refused\n", r.Claims, r.Ready, r.CreateErrors)
	fmt.Fprintf(w, "  double adoptions       %d Sandboxes, %d claims\n", len(r.DoubleOwnedSandboxes), len(r.DoubleBoundClaims))
	fmt.Fprintf(w, "  lost claims            %d\n", r.Lost)
	fmt.Fprintf(w, "  worst create→podIPs    %s (claims ready in time); the last of them ready %s after the last fault\n", r.WorstClaimLatency, r.AllReadyAfterFault)
	fmt.Fprintf(w, "  pool back at size      %s after the last fault\n", r.PoolRestored)
	fmt.Fprintf(w, "  leaks after cleanup    %v\n", r.Leaks)
	fmt.Fprintf(w, "  simulated-node retries %d pods nudged after kwok dropped a failed status write (a kubelet retries it)\n", r.NodeAgentResyncs)
	fmt.Fprintf(w, "  writes per claim       %v\n", r.WritesPerClaim)
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
	if v := r.Violations(); len(v) > 0 {
		fmt.Fprintf(w, "INVARIANTS BROKEN:\n  %s\n", strings.Join(v, "\n  "))
	} else {
		fmt.Fprintln(w, "all invariants held")
	}
}

// WriteJSON saves the report.
func (r *ChaosReport) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
