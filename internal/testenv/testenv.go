// Package testenv starts a real control plane for tests: kube-apiserver and etcd through
// controller-runtime's envtest (with our own binaries from hack/build-k8s.sh, found through
// KUBEBUILDER_ASSETS) plus, when asked, kube-controller-manager so that garbage collection
// (ownerReference cascades) happens as in a real cluster.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agent-sandbox/agent-sandbox/internal/manager"
)

// Options selects the parts to start.
type Options struct {
	// ControllerManager starts kube-controller-manager with the garbage collector and the
	// namespace controller.
	ControllerManager bool
}

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client

	env *envtest.Environment
	kcm *process
}

// Start brings up the control plane with our CRDs installed.
func Start(opts Options) (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, " +
			"which builds kube-apiserver, etcd and kube-controller-manager (hack/build-k8s.sh) and sets it")
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	// Tests don't need durability; fsync dominates etcd's cost on small VMs.
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Append("unsafe-no-fsync", "true")
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	e := &Env{Config: cfg, env: env}
	scheme, err := manager.NewScheme()
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		_ = e.Stop()
		return nil, err
	}
	if opts.ControllerManager {
		if e.kcm, err = startControllerManager(env, assets); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// Stop stops every process Start started, by pid.
func (e *Env) Stop() error {
	var errs []error
	if e.kcm != nil {
		errs = append(errs, e.kcm.stop())
	}
	errs = append(errs, e.env.Stop())
	return errors.Join(errs...)
}

// repoRoot finds the module root, where config/ lives, from the test's working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}
