// Package testenv starts a real control plane for tests: kube-apiserver and etcd through
// controller-runtime's envtest (with our own binaries from hack/build-k8s.sh, found through
// KUBEBUILDER_ASSETS) plus, when asked, kube-controller-manager so that garbage collection
// (ownerReference cascades) happens as in a real cluster. The ValidatingAdmissionPolicies of
// config/admission are installed and enforced before Start returns, as the install ships them.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
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
	// Scheduler starts kube-scheduler (needed for pods to land on kwok nodes).
	Scheduler bool
	// KwokNodes starts kwok and registers that many simulated nodes that run pods instantly.
	KwokNodes int
	// AuditLogPath, when set, makes the API server log every write (user, verb, object) there
	// as JSON lines, so benchmarks can count writes per client.
	AuditLogPath string
	// CRDDir replaces config/crd/bases as the CRDs installed, e.g. an earlier release's to
	// test an upgrade.
	CRDDir string
	// NoAdmissionPolicies leaves config/admission out: its policies match the current storage
	// version, which CRDs from CRDDir may not serve without a running conversion webhook.
	NoAdmissionPolicies bool
	// DataDir holds logs and kubeconfigs of the processes started; a temp dir when empty.
	DataDir string
	// Restartable keeps etcd's data and the API server's certificates in DataDir, so that
	// RestartEtcd and RestartAPIServer bring them back with the same state, address and
	// credentials (fault-injection benchmarks).
	Restartable bool
	// ConversionWebhook points the CRDs' conversion at a webhook on loopback (with a CA envtest
	// makes); the test's manager serves it with Env.WebhookOptions().
	ConversionWebhook bool
}

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client

	env     *envtest.Environment
	procs   []*process // stopped in reverse order
	dataDir string
	ownDir  bool // dataDir was made by Start and goes with Stop
	assets  string
}

// Start brings up the control plane with our CRDs and the ValidatingAdmissionPolicies of
// config/admission installed (and enforced).
func Start(opts Options) (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, " +
			"which builds kube-apiserver, etcd and kube-controller-manager (hack/build-k8s.sh) and sets it")
	}
	ownDir := opts.DataDir == ""
	if ownDir {
		var err error
		if opts.DataDir, err = os.MkdirTemp("", "testenv-"); err != nil {
			return nil, err
		}
	}
	removeOwnDir := func() {
		if ownDir {
			_ = os.RemoveAll(opts.DataDir)
		}
	}
	env, err := environment(opts, assets)
	if err != nil {
		removeOwnDir()
		return nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		removeOwnDir()
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	e := &Env{Config: cfg, env: env, dataDir: opts.DataDir, ownDir: ownDir, assets: assets}
	if err := e.startRest(opts); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// environment is the envtest configuration opts ask for: our CRDs (or opts.CRDDir's), etcd
// without fsync, and the optional webhook, audit log and restartable state in opts.DataDir.
func environment(opts Options, assets string) (*envtest.Environment, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	crdDir := filepath.Join(root, "config", "crd", "bases")
	if opts.CRDDir != "" {
		crdDir = opts.CRDDir
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{crdDir},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	if opts.ConversionWebhook {
		if err := configureConversionWebhook(env); err != nil {
			return nil, err
		}
	}
	// Tests don't need durability; fsync dominates etcd's cost on small VMs.
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Append("unsafe-no-fsync", "true")
	if opts.AuditLogPath != "" {
		if err := configureAudit(env, opts.DataDir, opts.AuditLogPath); err != nil {
			return nil, err
		}
	}
	if opts.Restartable {
		if err := keepStateIn(env, opts.DataDir); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// startRest makes the client and installs or starts what opts ask for beside the API server.
func (e *Env) startRest(opts Options) error {
	scheme, err := manager.NewScheme()
	if err != nil {
		return err
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if !opts.NoAdmissionPolicies {
		if err := e.installAdmissionPolicies(); err != nil {
			return err
		}
	}
	if opts.ControllerManager {
		if err := e.startControllerManager(opts.KwokNodes > 0); err != nil {
			return err
		}
	}
	if opts.Scheduler {
		if err := e.startScheduler(); err != nil {
			return err
		}
	}
	if opts.KwokNodes > 0 {
		return e.startKwok(opts.KwokNodes)
	}
	return nil
}

// Stop stops every process Start started, by pid.
func (e *Env) Stop() error {
	var errs []error
	for i := len(e.procs) - 1; i >= 0; i-- {
		errs = append(errs, e.procs[i].stop())
	}
	errs = append(errs, e.env.Stop())
	if e.ownDir {
		errs = append(errs, os.RemoveAll(e.dataDir))
	}
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

// Kubeconfig writes a kubeconfig for a new user of the API server (in system:masters) and
// returns its path; the user's name is what the audit log records for its requests.
func (e *Env) Kubeconfig(user string) (string, error) {
	return e.UserKubeconfig(user, "system:masters")
}

// UserKubeconfig writes a kubeconfig for a new user in the given groups (none: only the
// rights bound to the user's name) and returns its path.
func (e *Env) UserKubeconfig(user string, groups ...string) (string, error) {
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("creating user %s: %w", user, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(e.dataDir, user+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// Binary is the path of a Kubernetes binary in the assets folder.
func (e *Env) Binary(name string) string { return filepath.Join(e.assets, name) }

// GoleakOptions ignores the process-wide goroutines that client libraries start once and never
// stop; test mains check for leaks with them after stopping the control plane.
func GoleakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.BackoffUntil"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*delayingType[...]).waitingLoop"),
		// cert-controller's "certs mounted?" check sleeps through an exponential backoff that no
		// context ends; the webhook gate stops waiting for it (conversion.gatedServer), so a test
		// can end while it still sleeps. It returns at its next look at the files.
		goleak.IgnoreAnyFunction("github.com/open-policy-agent/cert-controller/pkg/rotator.(*CertRotator).ensureCertsMounted"),
		goleak.IgnoreAnyFunction("github.com/open-policy-agent/cert-controller/pkg/rotator.(*CertRotator).ensureReady"),
	}
}

// Main runs a package's tests with one shared control plane (started only when
// KUBEBUILDER_ASSETS is set, as `make test` does; tests that need it skip otherwise), stops it,
// and then fails the run on leaked goroutines. Use it as os.Exit(testenv.Main(m, "pkg", &env)).
func Main(m *testing.M, name string, env **Env) int {
	return MainWith(m, name, env, Options{})
}

// MainWith is Main with more of the control plane (opts; the conversion webhook is always on).
func MainWith(m *testing.M, name string, env **Env, opts Options) int {
	stopWebhook := func() {}
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		// The clients under test may speak v1alpha1, which the API server converts to the
		// stored v1beta1 through the webhook: it runs as in an install.
		opts.ConversionWebhook = true
		started, err := Start(opts)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: starting control plane: %v\n", name, err)
			return 1
		}
		*env = started
		if stopWebhook, err = started.ServeConversion(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: starting the conversion webhook: %v\n", name, err)
			_ = started.Stop()
			return 1
		}
	}
	code := m.Run()
	stopWebhook()
	if *env != nil {
		if err := (*env).Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: stopping control plane: %v\n", name, err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(GoleakOptions()...); err != nil {
			fmt.Fprintf(os.Stderr, "%s: leaked goroutines: %v\n", name, err)
			code = 1
		}
	}
	return code
}

// Require skips t when KUBEBUILDER_ASSETS lacks one of bins (default: kube-apiserver and etcd),
// and fails it when CI is set: there a missing binary is a broken setup, and a test that did
// not run must not pass as green.
func Require(t testing.TB, bins ...string) {
	t.Helper()
	if len(bins) == 0 {
		bins = []string{"kube-apiserver", "etcd"}
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	for _, bin := range bins {
		if _, err := os.Stat(filepath.Join(assets, bin)); assets == "" || err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing from KUBEBUILDER_ASSETS=%q in CI: run through `make test`, which builds it", bin, assets)
			}
			t.Skipf("needs %s in KUBEBUILDER_ASSETS: run through `make test`", bin)
		}
	}
}
