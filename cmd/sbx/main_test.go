package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

// env is the shared control plane; nil without KUBEBUILDER_ASSETS, when the
// tests that need it skip.
var env *testenv.Env

func TestMain(m *testing.M) {
	if invokedName(os.Args[0]) == "kubectl sbx" {
		main() // this test binary, linked as kubectl-sbx, is the plugin kubectl runs (plugin_test.go)
	}
	// kube-controller-manager writes the tokens of E2B key Secrets (e2bkey_test.go).
	os.Exit(testenv.MainWith(m, "sbx", &env, testenv.Options{ControllerManager: true}))
}

// kubeconfig is a kubeconfig file for the control plane's admin, written once.
var kubeconfig = sync.OnceValues(func() (string, error) { return env.Kubeconfig("sbx-cli") })

// nowhereKubeconfig points at a cluster nobody listens at.
const nowhereKubeconfig = "testdata/nowhere.kubeconfig"

// cli runs sbx commands against the test API server and a real sandboxd,
// in its own namespace, with a stand-in controller marking claims ready.
type cli struct {
	t          *testing.T
	ns         string
	kubeconfig string
	d          *sdktest.Sandboxd
}

var nsCounter atomic.Int32

func newCLI(t *testing.T) *cli {
	t.Helper()
	if env == nil {
		testenv.Require(t)
	}
	ns := fmt.Sprintf("sbx-cli-%d", nsCounter.Add(1))
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	path, err := kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	c := &cli{t: t, ns: ns, kubeconfig: path, d: sdktest.NewSandboxd(t)}
	sc, err := sdk.New(sdk.Options{RESTConfig: env.Config, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctl := &sdktest.Controller{Client: sc.KubeClient(), Namespace: ns,
		Hold: func(cl *extv1alpha1.SandboxClaim) bool { return cl.Spec.TemplateRef.Name == "held" }}
	if err := ctl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.Stop)
	return c
}

type result struct {
	stdout, stderr string
	code           int
}

// run executes sbx with args, and the flags that point it at the control plane's admin, the
// test's namespace and sandboxd.
func (c *cli) run(stdin string, args ...string) result {
	c.t.Helper()
	global := []string{"--kubeconfig", c.kubeconfig, "-n", c.ns, "--mode", "direct", "--sandbox-port", strconv.Itoa(c.d.Port)}
	return runSbx(stdin, append(global, args...)...)
}

// runSbx runs sbx in this process, as the binary sbx, with its streams captured.
func runSbx(stdin string, args ...string) result {
	streams, in, out, errOut := genericiooptions.NewTestIOStreams()
	in.WriteString(stdin)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := newApp("sbx", streams).run(ctx, args)
	return result{out.String(), errOut.String(), code}
}

// mustRun fails the test unless the command exits 0.
func (c *cli) mustRun(stdin string, args ...string) result {
	c.t.Helper()
	r := c.run(stdin, args...)
	if r.code != 0 {
		c.t.Fatalf("sbx %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// offline runs sbx against a cluster nobody listens at (argument and usage errors).
func offline(args ...string) result {
	return runSbx("", append([]string{"--kubeconfig", nowhereKubeconfig}, args...)...)
}
