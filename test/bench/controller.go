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
	"syscall"
	"time"
)

// controllerProc is the agent-sandbox controller running as its own process, so its CPU and
// memory are measured apart from the load generator's.
type controllerProc struct {
	cmd       *exec.Cmd
	done      chan error
	pprofAddr string
	logPath   string
}

// startController builds cmd/controller and runs it against kubeconfig.
func startController(ctx context.Context, repoRoot, dir, kubeconfig string) (*controllerProc, error) {
	bin := filepath.Join(dir, "agent-sandbox-controller")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/controller")
	build.Dir, build.Stdout, build.Stderr = repoRoot, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building the controller: %w", err)
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=",
		"--pprof-bind-address="+pprofAddr, "--zap-log-level=error", "--kube-api-qps=2000", "--kube-api-burst=4000")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &controllerProc{cmd: cmd, done: make(chan error, 1), pprofAddr: pprofAddr, logPath: logPath}
	go func() { p.done <- cmd.Wait(); _ = logFile.Close() }()
	return p, nil
}

func (p *controllerProc) pid() int { return p.cmd.Process.Pid }

// profile records a CPU profile of the controller for d into path.
func (p *controllerProc) profile(d time.Duration, path string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.pprofAddr, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

func (p *controllerProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
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
