package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
)

// replicaSet keeps two controller processes running with leader election, restarting any that
// exits, as a Deployment's kubelet would (a leader that loses its lease exits by design).
type replicaSet struct {
	bin, kubeconfig, dir string
	args                 []string

	mu       sync.Mutex
	procs    []*controllerProc
	started  int
	stopping bool
	wg       sync.WaitGroup
}

func startReplicas(ctx context.Context, env *testenv.Env, cfg ChaosConfig) (*replicaSet, error) {
	kubeconfig, err := env.Kubeconfig("agent-sandbox-controller")
	if err != nil {
		return nil, err
	}
	bin, err := buildController(ctx, cfg.RepoRoot, cfg.Dir)
	if err != nil {
		return nil, err
	}
	rs := &replicaSet{bin: bin, kubeconfig: kubeconfig, dir: cfg.Dir, args: []string{
		"--leader-elect=true",
		"--leader-election-lease-duration=" + cfg.LeaseDuration.String(),
		"--leader-election-renew-deadline=" + cfg.RenewDeadline.String(),
		"--leader-election-retry-period=" + cfg.RetryPeriod.String(),
	}}
	for i := 0; i < 2; i++ {
		if err := rs.launch(); err != nil {
			rs.stop()
			return nil, err
		}
	}
	return rs, nil
}

// launch starts one more replica and watches it: when it exits on its own, another takes its
// place after a second.
func (rs *replicaSet) launch() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.stopping {
		return nil
	}
	rs.started++
	p, err := launchController(rs.bin, filepath.Join(rs.dir, fmt.Sprintf("controller-%d.log", rs.started)), rs.kubeconfig, nil, rs.args...)
	if err != nil {
		return err
	}
	rs.procs = append(rs.procs, p)
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		<-p.exited
		if rs.remove(p) {
			time.Sleep(time.Second)
			if err := rs.launch(); err != nil {
				logf("chaos: restarting a controller replica: %v", err)
			}
		}
	}()
	return nil
}

// remove forgets an exited replica; it reports whether a replacement is wanted.
func (rs *replicaSet) remove(p *controllerProc) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, q := range rs.procs {
		if q == p {
			rs.procs = append(rs.procs[:i], rs.procs[i+1:]...)
			break
		}
	}
	return !rs.stopping
}

// leader is the replica whose leader-election gauge is 1, if one is leading right now.
func (rs *replicaSet) leader() *controllerProc {
	rs.mu.Lock()
	procs := append([]*controllerProc(nil), rs.procs...)
	rs.mu.Unlock()
	for _, p := range procs {
		if p.isLeader() {
			return p
		}
	}
	return nil
}

// total is how many processes were started in all.
func (rs *replicaSet) total() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.started
}

func (rs *replicaSet) stop() {
	rs.mu.Lock()
	rs.stopping = true
	procs := append([]*controllerProc(nil), rs.procs...)
	rs.mu.Unlock()
	for _, p := range procs {
		p.stop()
	}
	rs.wg.Wait()
}
