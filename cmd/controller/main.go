// Command agent-sandbox-controller runs the Sandbox controllers.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandbox"
	"github.com/agent-sandbox/agent-sandbox/internal/manager"
)

func main() {
	var opts manager.Options
	fs := flag.CommandLine
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", false, "Elect a leader so that only one replica reconciles; enable when running more than one.")
	fs.StringVar(&opts.LeaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (defaults to the pod's namespace).")
	fs.StringVar(&opts.ClusterDomain, "cluster-domain", sandbox.DefaultClusterDomain, "Cluster DNS domain used in status.serviceFQDN.")
	fs.IntVar(&opts.SandboxWorkers, "sandbox-workers", 16, "Sandboxes reconciled in parallel.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nRuns the agent-sandbox controllers (Sandbox) against the cluster in --kubeconfig,\n$KUBECONFIG or the in-cluster config.\n\nFlags:\n", os.Args[0])
		fs.PrintDefaults()
	}
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "loading kubeconfig")
		os.Exit(1)
	}
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		log.Error(err, "building manager")
		os.Exit(1)
	}
	log.Info("starting manager", "metrics", opts.MetricsAddr, "probes", opts.ProbeAddr, "leaderElection", opts.LeaderElection)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager exited")
		os.Exit(1)
	}
}
