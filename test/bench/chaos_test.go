package bench_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
	"github.com/agent-sandbox/agent-sandbox/test/bench"
)

// The short chaos run `make test` includes: claims keep coming while the leading controller is
// killed twice and the API server restarts once (8 claims/s for 25 s); no claim may be lost or doubled, nothing may
// leak. `make chaos` is the long version (docs/bench.md).
func TestChaosShortRunKeepsEveryInvariant(t *testing.T) {
	testenv.Require(t, "kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok")
	cfg := bench.DefaultChaos()
	// A pool as large as the run's claims: every claim can be served warm, so what is measured
	// is recovery from the faults, not the cold-start throughput of a busy 2-core machine.
	cfg.Rate, cfg.Duration, cfg.Pool, cfg.Nodes = 8, 25*time.Second, 200, 3
	cfg.DeleteAfter, cfg.KillEvery = 2*time.Second, 6*time.Second
	cfg.RestartAPIServerAt, cfg.RestartEtcdAt = 8*time.Second, 0
	// make test runs packages in parallel on 2 cores: the short run allows 15 s for every claim
	// to be ready after the last fault (failover alone takes up to the 4 s lease); `make chaos`
	// holds to 10 s on a machine it has to itself.
	cfg.Recovery = 15 * time.Second
	cfg.RepoRoot, cfg.Dir = "../..", t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	report, err := bench.RunChaos(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	report.Print(os.Stdout)
	kills := 0
	for _, f := range report.Faults {
		if f.Kind == "kill-leader" {
			kills++
		}
	}
	// Kills keep 6 s from the previous fault: two fit in the window unless the API server takes
	// over 11 s to come back, then one.
	if kills < 1 || len(report.Faults) != kills+1 {
		t.Errorf("faults = %+v, want leader kills (two, or one after a slow restart) and one API server restart", report.Faults)
	}
	for _, v := range report.Violations() {
		t.Error(v)
	}
}
