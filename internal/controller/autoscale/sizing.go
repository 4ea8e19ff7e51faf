package autoscale

import (
	"fmt"
	"math"
	"time"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
)

// Defaults of spec.autoscaling, as the API server applies them; a pool read before its CRD had
// them (or a unit test's) gets the same.
const (
	DefaultHeadroomSeconds        = 10
	DefaultWindow                 = time.Minute
	DefaultScaleDownStabilization = 5 * time.Minute
	DefaultScaleToZeroAfter       = 10 * time.Minute
)

// Policy is spec.autoscaling with its defaults applied.
type Policy struct {
	Min, Max      int32
	Headroom      time.Duration // the target: members for this long of claims at the observed rate
	Window        time.Duration // claims are counted over this span
	Stabilization time.Duration // a lower size must be wanted this long before the pool shrinks
	IdleAfter     time.Duration // after this long without a claim the pool drops to Min
}

// PolicyOf applies the defaults to a pool's spec.autoscaling (which must not be nil).
func PolicyOf(a *extv1beta1.SandboxWarmPoolAutoscaling) Policy {
	p := Policy{Max: a.MaxReplicas, Headroom: DefaultHeadroomSeconds * time.Second, Window: DefaultWindow,
		Stabilization: DefaultScaleDownStabilization, IdleAfter: DefaultScaleToZeroAfter}
	if a.MinReplicas != nil {
		p.Min = *a.MinReplicas
	}
	if a.HeadroomSeconds != nil {
		p.Headroom = time.Duration(*a.HeadroomSeconds) * time.Second
	}
	if a.Window != nil {
		p.Window = a.Window.Duration
	}
	if a.ScaleDownStabilization != nil {
		p.Stabilization = a.ScaleDownStabilization.Duration
	}
	if a.ScaleToZeroAfter != nil {
		p.IdleAfter = a.ScaleToZeroAfter.Duration
	}
	return p
}

// Recommendation is a size the rate asked for at one moment; the pool keeps the highest of
// those made over the stabilization window.
type Recommendation struct {
	At       time.Time
	Replicas int32
}

// Input is what one decision looks at.
type Input struct {
	Policy Policy
	Now    time.Time
	// Rate is claims per second.
	Rate float64
	// LastActivity is the last claim, or when the pool (or the counting) began if there was none.
	LastActivity time.Time
	// Current is spec.replicas now.
	Current int32
	// History is the recommendations made so far (empty after a restart: Current then counts
	// as recommended now, so a restart never shrinks a pool early).
	History []Recommendation
}

// Decision is the size to set and why.
type Decision struct {
	Replicas int32
	Reason   string
	Message  string
	// History is Input.History with this decision's recommendation added and the expired ones dropped.
	History []Recommendation
	// RequeueAfter is when to decide again without a new claim: the rate fades, a stabilization
	// or the idle time runs out.
	RequeueAfter time.Duration
}

// Decide sizes the pool: ceil(rate × headroom) within [Min, Max], at once when that is more than
// now, only once the stabilization window has wanted less when it is less, and Min once no claim
// came for IdleAfter.
func Decide(in Input) Decision {
	p := in.Policy
	tick := min(max(p.Window/12, time.Second), 10*time.Second)
	idleAt := in.LastActivity.Add(p.IdleAfter)
	if !in.Now.Before(idleAt) {
		return Decision{Replicas: p.Min, Reason: extv1beta1.AutoscaleReasonIdle,
			Message:      fmt.Sprintf("no claim for %s: at minReplicas %d", p.IdleAfter, p.Min),
			History:      []Recommendation{{At: in.Now, Replicas: p.Min}},
			RequeueAfter: tick}
	}
	wanted := clamp(int32(math.Min(math.Ceil(in.Rate*p.Headroom.Seconds()), math.MaxInt32)), p.Min, p.Max)
	history := stabilizing(in.History, in.Now, p.Stabilization, in.Current)
	history = append(history, Recommendation{At: in.Now, Replicas: wanted})
	highest := wanted
	for _, r := range history {
		highest = max(highest, r.Replicas)
	}
	d := Decision{History: history, RequeueAfter: min(tick, idleAt.Sub(in.Now))}
	current := clamp(in.Current, p.Min, p.Max) // a changed min or max applies at once
	switch target := clamp(min(highest, max(current, wanted)), p.Min, p.Max); {
	case target > in.Current:
		d.Replicas, d.Reason = target, extv1beta1.AutoscaleReasonScaledUp
	case target < in.Current:
		d.Replicas, d.Reason = target, extv1beta1.AutoscaleReasonScaledDown
	case wanted < target:
		d.Replicas, d.Reason = target, extv1beta1.AutoscaleReasonStabilizing
	default:
		d.Replicas, d.Reason = target, extv1beta1.AutoscaleReasonSteady
	}
	d.Message = fmt.Sprintf("%.3g claims/s × %s headroom wants %d (within %d–%d); the highest over the last %s is %d",
		in.Rate, p.Headroom, wanted, p.Min, p.Max, p.Stabilization, highest)
	return d
}

// stabilizing keeps the recommendations younger than the window; an empty history starts from
// current.
func stabilizing(history []Recommendation, now time.Time, window time.Duration, current int32) []Recommendation {
	if len(history) == 0 {
		return []Recommendation{{At: now, Replicas: current}}
	}
	kept := make([]Recommendation, 0, len(history)+1)
	for _, r := range history {
		if now.Sub(r.At) < window {
			kept = append(kept, r)
		}
	}
	return kept
}

func clamp(v, lo, hi int32) int32 { return max(lo, min(v, hi)) }
