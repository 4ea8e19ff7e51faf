// Package integration tests the controllers against a real kube-apiserver, etcd and
// kube-controller-manager (for garbage collection). Run through `make test`, which builds the
// binaries and sets KUBEBUILDER_ASSETS.
package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/kubelog"
	"github.com/agent-sandbox/agent-sandbox/internal/manager"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
)

var (
	// scopedSigner signs the router tokens the controller mints for claims in these tests.
	scopedSigner = mustSigner(strings.Repeat("s", scopedtoken.MinSecretLen))
	env          *testenv.Env
	k8s          client.Client // a direct (uncached) client: what a user or kubectl sees
	// claimSpans records the controller's spans (tracing_test.go).
	claimSpans = tracetest.NewSpanRecorder()
)

func mustSigner(secret string) *scopedtoken.Signer {
	s, err := scopedtoken.NewSigner([]byte(secret))
	if err != nil {
		panic(err)
	}
	return s
}

// defaultRuntimeClass is the controller's --default-runtime-class in these tests.
const defaultRuntimeClass = "gvisor"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	kubelog.Setup(controllerLogging(), os.Stderr)
	var err error
	env, err = testenv.Start(testenv.Options{ControllerManager: true, ConversionWebhook: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: starting control plane:", err)
		return 1
	}
	k8s = env.Client

	mgrConfig := rest.CopyConfig(env.Config)
	mgrConfig.QPS, mgrConfig.Burst = 500, 1000
	mgrConfig.Wrap(controllerWrites.wrap)
	// Every test runs with claim tracing on (into claimSpans), so the write counts hold with it.
	// Template pods run under the gvisor RuntimeClass, as in the local cluster; the API server's
	// RuntimeClass admission refuses pods whose class does not exist, so it is made first.
	if err := k8s.Create(context.Background(), &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: defaultRuntimeClass}, Handler: "runsc"}); err != nil {
		fmt.Fprintln(os.Stderr, "integration: creating RuntimeClass:", err)
		_ = env.Stop()
		return 1
	}
	mgr, err := manager.New(mgrConfig, manager.Options{SkipNameValidation: true, Webhook: env.WebhookOptions(), ScopedTokens: scopedSigner,
		DefaultRuntimeClass: defaultRuntimeClass,
		TracerProvider:      sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(claimSpans))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: building manager:", err)
		_ = env.Stop()
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()

	code := 1
	if err := env.WaitForWebhook(time.Minute); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
	} else {
		code = m.Run()
	}

	cancel()
	if err := <-mgrDone; err != nil {
		fmt.Fprintln(os.Stderr, "integration: manager:", err)
		code = 1
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: stopping control plane:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(testenv.GoleakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "integration: leaked goroutines:", err)
			code = 1
		}
	}
	return code
}

// controllerLogging shows errors only, to keep `go test` output readable; with
// TEST_VERBOSE_CONTROLLER set, every reconcile decision (-v=2).
func controllerLogging() *logging.Options {
	o := logging.NewOptions(logging.FormatText)
	level := "error"
	if os.Getenv("TEST_VERBOSE_CONTROLLER") != "" {
		level = "2"
	}
	_ = o.LevelFlag().Set(level)
	return o
}
