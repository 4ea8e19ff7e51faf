package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"

	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
)

// controllerProc is the agent-sandbox controller running as its own process, so its CPU and
// memory are measured apart from the load generator's.
type controllerProc struct {
	cmd         *exec.Cmd
	exited      chan struct{} // closed once the process has exited
	pprofAddr   string
	metricsAddr string
	logPath     string
}

// startController builds cmd/controller and runs it against kubeconfig, with a soft Go memory
// limit (GOMEMLIMIT) when memoryLimit is set.
func startController(ctx context.Context, repoRoot, dir, kubeconfig, memoryLimit string) (*controllerProc, error) {
	bin, err := buildController(ctx, repoRoot, dir)
	if err != nil {
		return nil, err
	}
	var env []string
	if memoryLimit != "" {
		env = []string{"GOMEMLIMIT=" + memoryLimit}
	}
	return launchController(bin, filepath.Join(dir, "controller.log"), kubeconfig, env)
}

// buildController builds cmd/controller into dir.
func buildController(ctx context.Context, repoRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "agent-sandbox-controller")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/controller")
	build.Dir, build.Stdout, build.Stderr = repoRoot, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building the controller: %w", err)
	}
	return bin, nil
}

// launchController starts one controller process logging to logPath (appended: a replica
// restarted after a kill writes on in the same file), with env added to this process's
// environment; extra flags come last and win.
func launchController(bin, logPath, kubeconfig string, env []string, extra ...string) (*controllerProc, error) {
	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// --metrics-auth=false: the benchmark reads the leader gauge of its own process on loopback,
	// with an admin's client certificate, which a TokenReview cannot check.
	args := append([]string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=" + metricsAddr, "--metrics-auth=false", "--health-probe-bind-address=",
		"--pprof-bind-address=" + pprofAddr, "--log-level=error", "--kube-api-qps=2000", "--kube-api-burst=4000",
		// Leader election stays on, as installed; its Lease lives outside the measured namespace.
		"--leader-election-namespace=kube-system",
		// The benchmarks speak v1alpha1 (the storage version) only: no conversion webhook.
		"--enable-webhook=false"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	p := &controllerProc{cmd: cmd, exited: make(chan struct{}), pprofAddr: pprofAddr, metricsAddr: metricsAddr, logPath: logPath}
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(p.exited) }()
	return p, nil
}

// isLeader reads the process's leader election gauge from its metrics endpoint.
func (p *controllerProc) isLeader() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "leader_election_master_status{") && strings.HasSuffix(line, " 1") {
			return true
		}
	}
	return false
}

// scrape reads the process's metrics, uncompressed: gzip would be the controller's CPU, which
// the bench measures.
func (p *controllerProc) scrape() (map[string]*dto.MetricFamily, error) {
	c := http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodGet, "http://"+p.metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// byLabel sums a family's samples (counter or gauge) by the value of one label.
func byLabel(fam *dto.MetricFamily, label string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range fam.GetMetric() {
		var key string
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				key = l.GetValue()
			}
		}
		out[key] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return out
}

// reconciles reads the process's reconcile counts by controller (every result summed) from
// controller-runtime's controller_runtime_reconcile_total.
func (p *controllerProc) reconciles() (map[string]float64, error) {
	fams, err := p.scrape()
	if err != nil {
		return nil, err
	}
	fam, ok := fams["controller_runtime_reconcile_total"]
	if !ok {
		return nil, fmt.Errorf("no controller_runtime_reconcile_total at %s", p.metricsAddr)
	}
	return byLabel(fam, "controller"), nil
}

// queueDepths reads the depth of each controller's work queue (workqueue_depth, by name).
func (p *controllerProc) queueDepths() (map[string]float64, error) {
	fams, err := p.scrape()
	if err != nil {
		return nil, err
	}
	fam, ok := fams["workqueue_depth"]
	if !ok {
		return nil, fmt.Errorf("no workqueue_depth at %s", p.metricsAddr)
	}
	return byLabel(fam, "name"), nil
}

// watchQueues samples the work queues' depths every interval until stop is closed and returns
// each queue's deepest sample.
func (p *controllerProc) watchQueues(interval time.Duration, stop <-chan struct{}) <-chan map[string]float64 {
	out := make(chan map[string]float64, 1)
	go func() {
		deepest := map[string]float64{}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if depths, err := p.queueDepths(); err == nil {
				for name, d := range depths {
					deepest[name] = max(deepest[name], d)
				}
			}
			select {
			case <-stop:
				out <- deepest
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// kill ends the process at once (SIGKILL: no lease release, no cleanup), as an eviction or a
// node failure would.
func (p *controllerProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func (p *controllerProc) pid() int { return p.cmd.Process.Pid }

// profile records a CPU profile of the controller for d into path.
func (p *controllerProc) profile(ctx context.Context, d time.Duration, path string) error {
	return fetchProfile(ctx, http.DefaultClient, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.pprofAddr, int(d.Seconds())), path)
}

// heapProfile saves the controller's heap profile (live objects after a GC) into path.
func (p *controllerProc) heapProfile(ctx context.Context, path string) error {
	return fetchProfile(ctx, http.DefaultClient, fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", p.pprofAddr), path)
}

func (p *controllerProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// apiServerProfile records a CPU profile of kube-apiserver for d into path (its /debug/pprof,
// on by default, asked as an admin).
func apiServerProfile(ctx context.Context, env *testenv.Env, d time.Duration, path string) error {
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		return err
	}
	return fetchProfile(ctx, hc, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(env.Config.Host, "/"), int(d.Seconds())), path)
}

// fetchProfile GETs a pprof endpoint and writes the profile to path.
func fetchProfile(ctx context.Context, hc *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return saveProfile(resp, path)
}

// saveProfile writes a pprof response's body to path.
func saveProfile(resp *http.Response, path string) error {
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile: %s: %s", resp.Status, body)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
