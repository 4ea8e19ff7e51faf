package testenv

import (
	"fmt"
	"os"
	"path/filepath"

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
	return nil
}

// RestartAPIServer stops kube-apiserver and starts it again on the same address with the same
// certificates (Options.Restartable); clients reconnect on their own.
func (e *Env) RestartAPIServer() error {
	s := e.env.ControlPlane.GetAPIServer()
	if err := s.Stop(); err != nil {
		return fmt.Errorf("stopping kube-apiserver: %w", err)
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	return nil
}

// RestartEtcd stops etcd and starts it again on the same address with the same data
// (Options.Restartable); the API server reconnects on its own.
func (e *Env) RestartEtcd() error {
	etcd := e.env.ControlPlane.Etcd
	if err := etcd.Stop(); err != nil {
		return fmt.Errorf("stopping etcd: %w", err)
	}
	if err := etcd.Start(); err != nil {
		return fmt.Errorf("starting etcd again: %w", err)
	}
	return nil
}
