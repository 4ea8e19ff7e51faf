package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

// env is the shared control plane; nil without KUBEBUILDER_ASSETS, when the
// tests that need it skip.
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, "sbx", &env)) }

// cli runs sbx commands against the test API server and a real sandboxd,
// in its own namespace, with a stand-in controller marking claims ready.
type cli struct {
	t  *testing.T
	ns string
	d  *sdktest.Sandboxd
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
	c := &cli{t: t, ns: ns, d: sdktest.NewSandboxd(t)}
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

// run executes sbx with args (the namespace and direct mode are added).
func (c *cli) run(stdin string, args ...string) result {
	c.t.Helper()
	var out, errOut bytes.Buffer
	a := newApp(strings.NewReader(stdin), &out, &errOut)
	a.configure = func(o *sdk.Options) {
		o.RESTConfig = env.Config
		o.SandboxPort = c.d.Port
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := a.run(ctx, append([]string{"-n", c.ns, "--mode", "direct"}, args...))
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

// offline runs sbx with no cluster at all (argument and usage errors).
func offline(args ...string) result {
	var out, errOut bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errOut)
	a.configure = func(o *sdk.Options) {
		o.RESTConfig = &restConfigNowhere
	}
	code := a.run(context.Background(), args)
	return result{out.String(), errOut.String(), code}
}
