//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// The cluster every test shares, and clients the way integrators build them.
var (
	cluster *devcluster.Cluster
	restCfg *rest.Config
	kube    client.Client         // controller-runtime, core kinds + ours (claim per conversation, task workspaces)
	kcs     *kubernetes.Clientset // client-go, for the exec API (the harness's runs)
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: SKIPPED: the local cluster runs containerd and a kubelet, which needs root")
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cfg := spec.Config{Dir: os.Getenv("E2E_DEV_DIR"), Out: os.Stderr}
	var err error
	if cluster, err = devcluster.Up(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: bringing the local cluster up:", err)
		return 1
	}
	if err := connect(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	code := m.Run()
	// A cluster this run started is stopped again unless asked to keep it; one that was
	// already running is left as it was.
	if !cluster.Reused && os.Getenv("E2E_KEEP_CLUSTER") == "" {
		if err := devcluster.Down(context.Background(), cfg, false); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the local cluster:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(goleakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: leaked goroutines:", err)
			code = 1
		}
	}
	return code
}

func connect() error {
	var err error
	if restCfg, err = clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig); err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = 100, 200
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1alpha1.AddToScheme, extv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	if kube, err = client.New(restCfg, client.Options{Scheme: s}); err != nil {
		return err
	}
	kcs, err = kubernetes.NewForConfig(restCfg)
	return err
}

// goleakOptions ignores process-wide goroutines that client libraries start once and never stop.
func goleakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.BackoffUntil"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*delayingType[...]).waitingLoop"),
		// Idle keep-alive connections of the shared clients' transports.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		// The reapers of cluster processes this run started (by Up, or by Restart in the fault
		// tests): they wait on processes that keep running when the cluster is kept.
		goleak.IgnoreAnyFunction("github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc.(*Supervisor).Start.func1"),
	}
}
