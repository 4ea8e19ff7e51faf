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
	"strconv"
	"strings"
	"syscall"
	"time"

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

// reconciles reads the process's reconcile counts by controller (every result summed) from
// controller-runtime's controller_runtime_reconcile_total.
func (p *controllerProc) reconciles() (map[string]float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	counts := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		labels, ok := strings.CutPrefix(line, "controller_runtime_reconcile_total{")
		if !ok {
			continue
		}
		_, rest, ok := strings.Cut(labels, `controller="`)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, `"`)
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		counts[name] += v
	}
	return counts, nil
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
