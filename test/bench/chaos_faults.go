package bench

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
)

// Fault is one injected failure; At is when it was over (the process killed, the server back).
type Fault struct {
	Kind   string        `json:"kind"`
	At     time.Duration `json:"atNs"`
	Detail string        `json:"detail,omitempty"`
}

type plannedFault struct {
	at   time.Duration
	kind string
}

// planFaults lays the faults out over the sending window.
func planFaults(cfg ChaosConfig) []plannedFault {
	var plan []plannedFault
	if cfg.KillEvery > 0 {
		for at := cfg.KillEvery; at < cfg.Duration; at += cfg.KillEvery {
			plan = append(plan, plannedFault{at, "kill-leader"})
		}
	}
	if cfg.RestartAPIServerAt > 0 {
		plan = append(plan, plannedFault{cfg.RestartAPIServerAt, "restart-apiserver"})
	}
	if cfg.RestartEtcdAt > 0 {
		plan = append(plan, plannedFault{cfg.RestartEtcdAt, "restart-etcd"})
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].at < plan[j].at })
	return plan
}

// injectFaults carries out the plan, each fault at its offset from start. A kill never comes
// sooner than KillEvery after the previous fault ended (an API server restart under load can take
// long; kills queued behind it must not then fire back to back), and none after the window.
func injectFaults(ctx context.Context, cfg ChaosConfig, env *testenv.Env, rs *replicaSet, start time.Time) []Fault {
	var done []Fault
	var lastEnd time.Time
	for _, f := range planFaults(cfg) {
		at := start.Add(f.at)
		if f.kind == "kill-leader" && !lastEnd.IsZero() && lastEnd.Add(cfg.KillEvery).After(at) {
			if at = lastEnd.Add(cfg.KillEvery); at.After(start.Add(cfg.Duration)) {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return done
		case <-time.After(time.Until(at)):
		}
		fault := Fault{Kind: f.kind}
		switch f.kind {
		case "kill-leader":
			fault.Detail = killLeader(rs)
		case "restart-apiserver":
			fault.Detail = errText(env.RestartAPIServer())
		case "restart-etcd":
			fault.Detail = errText(env.RestartEtcd())
		}
		fault.At = time.Since(start)
		lastEnd = time.Now()
		logf("chaos: %s at %s %s", fault.Kind, fault.At.Round(time.Millisecond), fault.Detail)
		done = append(done, fault)
	}
	return done
}

// killLeader SIGKILLs the leading replica (waiting up to a lease for one to lead); the replica
// set starts a replacement, as a Deployment would.
func killLeader(rs *replicaSet) string {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if p := rs.leader(); p != nil {
			p.kill()
			return "killed pid " + strconv.Itoa(p.pid())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "no replica was leading; none killed"
}

func errText(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return ""
}
