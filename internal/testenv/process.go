package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// process is a child process with its output in a log file, stopped by pid.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan error
}

func startControllerManager(env *envtest.Environment, assets string) (*process, error) {
	user, err := env.AddUser(envtest.User{Name: "kube-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("creating a kube-controller-manager user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "testenv-kcm-")
	if err != nil {
		return nil, err
	}
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	return startProcess("kube-controller-manager", dir, filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+kubeconfigPath,
		// Only what tests rely on: ownerReference cascades, namespace cleanup, and the removal
		// of the pvc-protection finalizer so deleted PVCs really go.
		"--controllers=garbage-collector-controller,namespace-controller,persistentvolumeclaim-protection-controller",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=10",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	)
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
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New(p.name + " did not exit after SIGKILL; see " + p.logPath)
	}
}
