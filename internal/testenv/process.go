package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is a child process with its output in a log file, stopped by pid.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan error
}

func (e *Env) startControllerManager(simulatedNodes bool) error {
	kubeconfig, err := e.Kubeconfig("kube-controller-manager")
	if err != nil {
		return err
	}
	// Only what tests rely on: ownerReference cascades, namespace cleanup, the removal of the
	// pvc- and pv-protection finalizers so deleted PVCs and PVs really go, and the PV binder
	// (claims of a class bind to the volumes its provisioner makes; a released one is reclaimed).
	// Not the node lifecycle controller: it would taint simulated nodes whose heartbeats lag
	// under load.
	// And the token controller, so a ServiceAccount token Secret (an E2B API key) gets its token,
	// signed with the key envtest gave the API server.
	controllers := "garbage-collector-controller,namespace-controller,persistentvolumeclaim-protection-controller," +
		"persistentvolume-protection-controller,persistentvolume-binder-controller,serviceaccount-token-controller"
	if simulatedNodes {
		controllers += ",serviceaccount-controller"
	}
	return e.start("kube-controller-manager",
		"--kubeconfig="+kubeconfig,
		"--controllers="+controllers,
		"--service-account-private-key-file="+filepath.Join(e.env.ControlPlane.GetAPIServer().CertDir, "sa-signer.key"),
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=10",
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
	)
}

func (e *Env) startScheduler() error {
	kubeconfig, err := e.Kubeconfig("kube-scheduler")
	if err != nil {
		return err
	}
	// The default client QPS (50) caps scheduling near 50 pods/s on its own.
	return e.start("kube-scheduler",
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=1000",
		"--kube-api-burst=2000",
	)
}

func (e *Env) start(name string, args ...string) error {
	p, err := startProcess(name, e.dataDir, e.Binary(name), args...)
	if err != nil {
		return err
	}
	e.procs = append(e.procs, p)
	return nil
}

func startProcess(name, dir, path string, args ...string) (*process, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s binary: %w (build it with hack/build-k8s.sh %s)", name, err, name)
	}
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		_ = logFile.Close()
	}()
	return p, nil
}

// stop sends SIGTERM, waits a bounded time, then SIGKILLs.
func (p *process) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done: //nolint:errcheck // killed on purpose: its exit status says so
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done: //nolint:errcheck // killed on purpose: its exit status says so
		return nil
	case <-time.After(10 * time.Second):
		return errors.New(p.name + " did not exit after SIGKILL; see " + p.logPath)
	}
}
