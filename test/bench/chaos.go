package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
)

// ChaosConfig is one fault-injection run: open-loop claims (some deleted again) while the
// leading controller replica is killed again and again and the API server and etcd restart.
type ChaosConfig struct {
	Rate        float64       // claims per second
	Duration    time.Duration // how long claims are sent (and faults injected)
	Pool        int           // warm pool size
	Nodes       int           // simulated nodes
	DeleteAfter time.Duration // each claim is deleted this long after it is ready
	KillEvery   time.Duration // the leader is SIGKILLed this often; 0: never
	// Offsets into the sending window of the one API server and one etcd restart (0: none).
	RestartAPIServerAt, RestartEtcdAt time.Duration
	// Recovery is how long after the last fault (or its own creation) every claim must be
	// ready; a claim that is not is lost.
	Recovery time.Duration
	// Lease timings of the two controller replicas (failover takes up to LeaseDuration).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Dir, RepoRoot                             string
}

// DefaultChaos is `make chaos`: 100 claims/s for 2 minutes, the leader killed every 10 s, one
// API server and one etcd restart.
func DefaultChaos() ChaosConfig {
	return ChaosConfig{Rate: 100, Duration: 2 * time.Minute, Pool: 500, Nodes: 20, DeleteAfter: 3 * time.Second,
		KillEvery: 10 * time.Second, RestartAPIServerAt: 45 * time.Second, RestartEtcdAt: 85 * time.Second,
		Recovery: 10 * time.Second, LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}
}

// nodeAgentStuckAfter is how long a bound pod may stay Pending before the simulated node is
// asked to look at it again (a kubelet syncs pod status every 10 s).
const nodeAgentStuckAfter = 15 * time.Second

// RunChaos runs the scenario and checks its invariants; the report says which broke.
func RunChaos(ctx context.Context, cfg ChaosConfig) (*ChaosReport, error) {
	quietLibraryLogs()
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "chaos-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	auditPath := filepath.Join(cfg.Dir, "audit.log")
	logf("chaos: starting a restartable control plane with %d kwok nodes (logs in %s)", cfg.Nodes, cfg.Dir)
	env, err := testenv.Start(testenv.Options{ControllerManager: true, Scheduler: true, KwokNodes: cfg.Nodes,
		AuditLogPath: auditPath, DataDir: cfg.Dir, Restartable: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = env.Stop() }()

	replicas, err := startReplicas(ctx, env, cfg)
	if err != nil {
		return nil, err
	}
	defer replicas.stop()
	c, cc, err := loadgenClient(env)
	if err != nil {
		return nil, err
	}
	if err := createNamespaceAndTemplate(ctx, c); err != nil {
		return nil, err
	}
	if _, err := fillPool(ctx, c, cfg.Pool); err != nil {
		return nil, err
	}

	cacheCtx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	rec, own, err := watchRun(cacheCtx, cc)
	if err != nil {
		return nil, err
	}

	report := &ChaosReport{Config: cfg.describe()}
	n := int(cfg.Rate * cfg.Duration.Seconds())
	start := time.Now()
	faultsDone := make(chan []Fault, 1)
	go func() { faultsDone <- injectFaults(ctx, cfg, env, replicas, start) }()
	stopChurn, stopResync := make(chan struct{}), make(chan struct{})
	go churn(ctx, c, rec, cfg.DeleteAfter, stopChurn)
	resyncs := nodeAgentResync(ctx, c, nodeAgentStuckAfter, stopResync)
	logf("chaos: firing %d claims at %.0f/s with faults", n, cfg.Rate)
	fire(ctx, c, namespace, template, n, cfg.Rate, "chaos", nil, rec)
	report.Faults = <-faultsDone
	lastFault := start
	if len(report.Faults) > 0 {
		lastFault = start.Add(report.Faults[len(report.Faults)-1].At)
	}
	settle(ctx, rec, lastFault, cfg.Recovery)
	close(stopChurn)
	readyNow, err := claimsWithPodIPs(ctx, c)
	if err != nil {
		report.Errors = append(report.Errors, "listing claims at the deadline: "+err.Error())
	}
	end := time.Now()

	report.judgeClaims(rec, readyNow, lastFault, cfg.Recovery)
	report.DoubleOwnedSandboxes, report.DoubleBoundClaims = own.doubles()
	report.ControllerProcesses = replicas.total()
	report.PoolRestored = waitPoolSize(ctx, c, cfg.Pool, lastFault)
	close(stopResync)
	report.NodeAgentResyncs = resyncs()
	report.Leaks = cleanUpAndFindLeaks(ctx, c)
	time.Sleep(2 * time.Second) // let the audit log's batch flush
	report.countWrites(auditPath, start, end)
	return report, nil
}

// watchRun starts the load generator's cache (stopped with ctx) and records, from watches, when
// each claim got pod IPs and which claim ever owned which Sandbox.
func watchRun(ctx context.Context, cc cache.Cache) (*recorder, *ownership, error) {
	rec, own := newRecorder(), newOwnership()
	go func() { _ = cc.Start(ctx) }()
	if err := watchClaims(ctx, cc, rec); err != nil {
		return nil, nil, err
	}
	if err := own.watch(ctx, cc); err != nil {
		return nil, nil, err
	}
	cc.WaitForCacheSync(ctx)
	return rec, own, nil
}

// claimsWithPodIPs asks the API server which claims have pod IPs right now.
func claimsWithPodIPs(ctx context.Context, c client.Client) (map[string]bool, error) {
	list := &extv1beta1.SandboxClaimList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(list.Items))
	for _, cl := range list.Items {
		out[cl.Name] = len(cl.Status.SandboxStatus.PodIPs) > 0
	}
	return out, nil
}

func (c ChaosConfig) describe() string {
	return fmt.Sprintf("%.0f claims/s for %s, pool %d, %d nodes, claims deleted %s after ready, leader killed every %s, "+
		"API server restart at %s, etcd restart at %s, lease %s/%s/%s, recovery bound %s",
		c.Rate, c.Duration, c.Pool, c.Nodes, c.DeleteAfter, c.KillEvery, c.RestartAPIServerAt, c.RestartEtcdAt,
		c.LeaseDuration, c.RenewDeadline, c.RetryPeriod, c.Recovery)
}

// settle waits until every claim sent has pod IPs, or the recovery bound after the last fault
// (and after the last send) has passed.
func settle(ctx context.Context, rec *recorder, lastFault time.Time, recovery time.Duration) {
	deadline := time.Now().Add(recovery)
	if d := lastFault.Add(recovery); d.After(deadline) {
		deadline = d
	}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if rec.pending() == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
