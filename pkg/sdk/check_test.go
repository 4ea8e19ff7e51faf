package sdk

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

// startBareAPIServer starts an API server on which agent-sandbox was never installed.
func startBareAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	bare := &envtest.Environment{BinaryAssetsDirectory: os.Getenv("KUBEBUILDER_ASSETS")}
	cfg, err := bare.Start()
	if err != nil {
		t.Fatalf("starting a bare API server: %v", err)
	}
	t.Cleanup(func() {
		if err := bare.Stop(); err != nil {
			t.Errorf("stopping the bare API server: %v", err)
		}
	})
	return cfg
}

func closedPortURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	return url
}

// The agent-session flow's startup validation: a missing CRD is fatal, an unreachable router a warning, and
// the two are reported separately.
func TestCheckClusterSeparatesFatalProblemsFromWarnings(t *testing.T) {
	if env == nil {
		testenv.Require(t)
	}
	bare := startBareAPIServer(t)
	up, down := sdktest.NewRouter(t).URL, closedPortURL(t)
	crdsMissing := []string{
		"API group agents.x-k8s.io/v1alpha1 is not served: CRDs sandboxes.agents.x-k8s.io are not installed",
		"API group extensions.agents.x-k8s.io/v1alpha1 is not served: CRDs sandboxclaims.extensions.agents.x-k8s.io, sandboxtemplates.extensions.agents.x-k8s.io, sandboxwarmpools.extensions.agents.x-k8s.io are not installed",
	}
	routerDown := []string{"router at " + down + " is not reachable"}
	cases := []struct {
		name         string
		cfg          *rest.Config
		router       string
		wantProblems []string // one entry per problem, each a substring of it
		wantWarnings []string
	}{
		{name: "installed, router up: nil", cfg: env.Config, router: up},
		{name: "installed, no router configured: nil", cfg: env.Config},
		{name: "installed, router down: a warning only", cfg: env.Config, router: down, wantWarnings: routerDown},
		{name: "CRDs missing, router up: fatal", cfg: bare, router: up, wantProblems: crdsMissing},
		{name: "CRDs missing, router down: fatal, router a warning", cfg: bare, router: down, wantProblems: crdsMissing, wantWarnings: routerDown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mode := ModeDirect
			if tc.router != "" {
				mode = ModeRouter
			}
			c, err := New(Options{RESTConfig: tc.cfg, Namespace: "default", Mode: mode, RouterURL: tc.router})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.CheckCluster(testCtx(t))
			wantFatal := len(tc.wantProblems) > 0
			if IsFatal(err) != wantFatal {
				t.Errorf("IsFatal(%v) = %v, want %v", err, IsFatal(err), wantFatal)
			}
			if len(tc.wantProblems)+len(tc.wantWarnings) == 0 {
				if err != nil {
					t.Errorf("CheckCluster = %v, want nil", err)
				}
				return
			}
			var ce *CheckError
			if !errors.As(err, &ce) {
				t.Fatalf("CheckCluster = %v, want a *CheckError", err)
			}
			matchEach(t, "problems", ce.Problems, tc.wantProblems)
			matchEach(t, "warnings", ce.Warnings, tc.wantWarnings)
			if want := "agent-sandbox is usable, with warnings"; !wantFatal && !strings.HasPrefix(err.Error(), want) {
				t.Errorf("message %q, want it to start with %q", err, want)
			}
		})
	}
}

func matchEach(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %q, want %d matching %q", what, got, len(want), want)
		return
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("%s[%d] = %q, want it to contain %q", what, i, got[i], want[i])
		}
	}
}
