package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// keepStateIn puts etcd's data and the API server's certificates in dir rather than in temp
// dirs that a stop removes, so a restarted process comes back with the same state.
func keepStateIn(env *envtest.Environment, dir string) error {
	etcdDir, certDir := filepath.Join(dir, "etcd-data"), filepath.Join(dir, "apiserver-certs")
	for _, d := range []string{etcdDir, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	env.ControlPlane.Etcd.DataDir = etcdDir // set up by Start before this is called
	env.ControlPlane.GetAPIServer().CertDir = certDir
	// A restart under load (a busy machine, a big audit log, many objects to list into the
	// watch cache) takes longer than envtest's 20 s default allows.
	// (envtest copies ControlPlaneStartTimeout onto both processes.)
	env.ControlPlaneStartTimeout = 2 * time.Minute
	return nil
}

// RestartAPIServer crashes kube-apiserver (SIGKILL: no graceful shutdown, as a node failure or
// an OOM kill would) and starts it again on the same address with the same certificates
// (Options.Restartable); clients reconnect on their own.
func (e *Env) RestartAPIServer() error {
	s := e.env.ControlPlane.GetAPIServer()
	if err := killByCmdline("kube-apiserver", s.CertDir); err != nil {
		return err
	}
	if err := stopAfterKill(s.Stop); err != nil {
		return fmt.Errorf("stopping kube-apiserver: %w", err)
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	return nil
}

// RestartEtcd crashes etcd (SIGKILL) and starts it again on the same address with the same data
// (Options.Restartable); the API server reconnects on its own.
func (e *Env) RestartEtcd() error {
	etcd := e.env.ControlPlane.Etcd
	if err := killByCmdline("etcd", etcd.DataDir); err != nil {
		return err
	}
	if err := stopAfterKill(etcd.Stop); err != nil {
		return fmt.Errorf("stopping etcd: %w", err)
	}
	if err := etcd.Start(); err != nil {
		return fmt.Errorf("starting etcd again: %w", err)
	}
	return nil
}

// stopAfterKill lets envtest forget a process killByCmdline killed. Its waiter may not have
// noticed the exit yet, and then stop signals a finished process (os.ErrProcessDone): ask again
// until it has.
func stopAfterKill(stop func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := stop()
		if !errors.Is(err, os.ErrProcessDone) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killByCmdline SIGKILLs the process running binary whose command line mentions marker (its own
// data or certificate directory, so no other process of the machine is touched) and waits for it
// to be gone.
func killByCmdline(binary, marker string) error {
	if marker == "" {
		return fmt.Errorf("%s: no state directory to find it by (Options.Restartable)", binary)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if filepath.Base(args[0]) != binary || !strings.Contains(string(raw), marker) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("killing %s (pid %d): %w", binary, pid, err)
		}
		for i := 0; i < 100 && syscall.Kill(pid, 0) == nil && !zombie(pid); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	}
	return fmt.Errorf("no running %s found for %s", binary, marker)
}

// zombie reports a process that has exited but not been reaped yet (envtest reaps it on Stop).
func zombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && len(stat) > i+2 && stat[i+2] == 'Z'
}
