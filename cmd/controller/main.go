// Command agent-sandbox-controller runs the Sandbox controllers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/fqdnpolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/pacer"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandbox"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxclaim"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxtemplate"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxwarmpool"
	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/kubelog"
	"github.com/agent-sandbox/agent-sandbox/internal/manager"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent"
	"github.com/agent-sandbox/agent-sandbox/internal/noredirect"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
)

func main() {
	var opts manager.Options
	fs := flag.CommandLine
	fv := bindFlags(fs, &opts)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nRuns the agent-sandbox controllers (Sandbox, SandboxTemplate, SandboxWarmPool, SandboxClaim) against the cluster in --kubeconfig,\n$KUBECONFIG or the in-cluster config.\n\nFlags:\n", os.Args[0])
		fs.PrintDefaults()
	}
	flag.Parse()
	if err := fv.apply(&opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	kubelog.Setup(fv.logging, os.Stderr)
	log := ctrl.Log.WithName("setup")
	setMemoryLimit(log)
	if err := run(opts, float32(*fv.qps), *fv.burst, log); err != nil {
		os.Exit(1)
	}
}

// flagValues are the flags that need parsing or checking before they become manager.Options.
type flagValues struct {
	routerLabels, dnsLabels, dnsIPs, linkLocal, scopedSecret *string
	routerURL, routerTokenFile, domainsEngine                *string
	nodeAgentToken                                           *string
	nodeAgentPort                                            *int
	qps                                                      *float64
	burst                                                    *int
	webhook                                                  *webhookFlags
	logging                                                  *logging.Options
}

// bindFlags registers every flag: the plain ones straight into opts, the rest into the returned
// values for apply.
func bindFlags(fs *flag.FlagSet, opts *manager.Options) *flagValues {
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&opts.MetricsAuth, "metrics-auth", true, "Serve metrics only to callers the API server authenticates (TokenReview) and allows get on the non-resource URL /metrics (SubjectAccessReview; the ClusterRole agent-sandbox-metrics-reader grants it); false: to anyone who reaches the port (local debugging).")
	fs.StringVar(&opts.PprofAddr, "pprof-bind-address", "", "Address to serve net/http/pprof on (off when empty).")
	fs.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", true, "Elect a leader so that only one replica reconciles (others are hot standbys); a new leader rebuilds its state from the API before it serves a claim.")
	fs.StringVar(&opts.LeaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (defaults to the pod's namespace; required outside a cluster).")
	fs.DurationVar(&opts.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a leader's lease lasts without renewal: the longest a standby waits after the leader dies.")
	fs.DurationVar(&opts.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader keeps retrying to renew before it gives up leading (and exits).")
	fs.DurationVar(&opts.RetryPeriod, "leader-election-retry-period", 2*time.Second, "How often candidates try to acquire, and the leader renews, the lease.")
	fs.StringVar(&opts.ClusterDomain, "cluster-domain", sandbox.DefaultClusterDomain, "Cluster DNS domain used in status.serviceFQDN.")
	fs.IntVar(&opts.SandboxWorkers, "sandbox-workers", sandbox.DefaultWorkers, "Sandboxes reconciled in parallel.")
	fs.IntVar(&opts.ClaimWorkers, "claim-workers", sandboxclaim.DefaultWorkers, "SandboxClaims reconciled in parallel.")
	fs.StringVar(&opts.DefaultRuntimeClass, "default-runtime-class", "", "RuntimeClass of the pods made from SandboxTemplates that set no runtimeClassName (e.g. gvisor); empty leaves them on the node's default runtime. Raw Sandboxes keep their own spec.")
	fs.DurationVar(&opts.MemberReadyTimeout, "warm-member-ready-timeout", sandboxwarmpool.DefaultMemberReadyTimeout, "A warm pool member not Ready this long after creation is replaced (unschedulable ones are kept and reported); a pool's agents.x-k8s.io/member-ready-timeout annotation overrides it.")
	fs.DurationVar(&opts.RefillQuiet, "refill-quiet", pacer.DefaultQuiet, "Warm pools refill only after claims have been quiet this long, so refills never compete with a claim burst.")
	fs.DurationVar(&opts.RefillMaxHold, "refill-max-hold", pacer.DefaultMaxHold, "The longest warm pool refills (and the Sandbox controller's label bookkeeping) wait for claims to go quiet at a stretch: under a claim stream that is never quiet, a small refill still goes through this often.")
	fs.StringVar(&opts.Router.Namespace, "router-namespace", sandboxtemplate.DefaultRouterPeer.Namespace, "Namespace of the sandbox router; the default NetworkPolicy admits ingress only from its pods.")
	fs.StringVar(&opts.Network.DNSNamespace, "dns-namespace", "kube-system", "Namespace of the cluster DNS pods, the only DNS servers a Sandbox in restricted egress mode reaches.")
	fs.BoolVar(&opts.WebhookOnly, "webhook-only", false, "Serve only the CRD conversion webhook (and rotate its certificate): no reconcilers, no leader election. The install runs it as a second container of each controller pod, so that a controller that crashes leaves the webhook serving.")
	fv := &flagValues{
		routerLabels:    fs.String("router-pod-labels", labels.Set(sandboxtemplate.DefaultRouterPeer.PodLabels).String(), "Labels (k=v,k2=v2) of the sandbox router's pods."),
		dnsLabels:       fs.String("dns-pod-labels", "k8s-app=kube-dns", "Labels (k=v,k2=v2) of the cluster DNS pods."),
		dnsIPs:          fs.String("dns-service-ips", "", "Addresses of the cluster DNS Service (comma-separated); empty: those of the kube-dns Service in --dns-namespace, read at start."),
		linkLocal:       fs.String("egress-allowed-link-local", "", "Link-local prefixes (comma-separated, e.g. 169.254.20.10/32 for a node-local DNS cache) that Sandbox egress may reach; every other 169.254.0.0/16 and fe80::/10 address (cloud metadata servers) stays closed to every Sandbox."),
		domainsEngine:   fs.String("egress-domains-engine", string(fqdnpolicy.EngineAuto), "How domain allow-lists (agents.x-k8s.io/egress-domains) are enforced: auto (a CiliumNetworkPolicy per list when the API serves cilium.io/v2 CiliumNetworkPolicy at start), cilium (the same; refuse to start without it), none (never: Sandboxes that list domains get no pod unless they fail open; for a Cilium whose DNS proxy is off)."),
		routerURL:       fs.String("router-url", "", "The sandbox router's URL (e.g. http://sandbox-router-svc.agent-sandbox-system.svc:8080), through which the idle pause asks sandboxd about activity; empty: Sandboxes with agents.x-k8s.io/idle-timeout are never paused."),
		routerTokenFile: fs.String("router-token-file", "/var/run/secrets/kubernetes.io/serviceaccount/token", "Bearer token sent to the router with --router-url (read on every call); a missing file sends none."),
		nodeAgentPort:   fs.Int("node-agent-port", 0, "Port of the node agent on each node's address (the DaemonSet of nodeAgent.enabled), which saves and restores the memory of Sandboxes annotated agents.x-k8s.io/pause-mode=KeepMemory; 0: off, their pauses delete the pod as every other."),
		nodeAgentToken:  fs.String("node-agent-token-file", "/var/run/secrets/agent-sandbox/node-agent/token", "The controller's token for the node agent's audience ("+nodeagent.Audience+"), read on every call."),
		scopedSecret:    fs.String("scoped-token-secret-file", "", "File holding the secret (at least 32 bytes, shared with the router's flag of the same name) that signs router tokens scoped to one Sandbox, minted into a Secret <claim>-router-token for claims annotated agents.x-k8s.io/router-token=true; empty: off."),
		qps:             fs.Float64("kube-api-qps", 200, "Client-side limit of API requests per second (the server's priority and fairness still applies)."),
		burst:           fs.Int("kube-api-burst", 400, "Client-side burst of API requests."),
		webhook:         bindWebhookFlags(fs),
		logging:         logging.NewOptions(logging.FormatJSON),
	}
	fv.logging.BindFlags(fs)
	fs.Var(fv.logging.LevelFlag(), "zap-log-level", "Deprecated, use -v: debug, info, warn, error or a number N (= -v=N).")
	return fv
}

// apply parses and checks the values into opts; an error names the flag (exit 2).
func (fv *flagValues) apply(opts *manager.Options) error {
	routerPodLabels, err := parseLabels(*fv.routerLabels)
	if err != nil {
		return fmt.Errorf("--router-pod-labels: %w", err)
	}
	opts.Router.PodLabels = routerPodLabels
	if err := parseNetworkFlags(opts, *fv.dnsLabels, *fv.dnsIPs, *fv.linkLocal); err != nil {
		return err
	}
	if opts.EgressDomainsEngine, err = fqdnpolicy.ParseEngine(*fv.domainsEngine); err != nil {
		return fmt.Errorf("--egress-domains-engine: %w", err)
	}
	if *fv.routerURL != "" {
		u, err := url.Parse(*fv.routerURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--router-url %q: want an http(s) URL such as http://sandbox-router-svc.agent-sandbox-system.svc:8080", *fv.routerURL)
		}
		opts.Activity = &sandbox.RouterActivity{URL: *fv.routerURL, TokenFile: *fv.routerTokenFile,
			Client: noredirect.Client(&http.Client{Timeout: 2 * time.Second})}
	}
	if *fv.nodeAgentPort > 0 {
		opts.NodeAgents = nodeagent.NewClient(*fv.nodeAgentPort, *fv.nodeAgentToken)
	}
	if opts.ScopedTokens, err = loadScopedSigner(*fv.scopedSecret); err != nil {
		return fmt.Errorf("--scoped-token-secret-file: %w", err)
	}
	if opts.Webhook, err = fv.webhook.options(); err != nil {
		return err
	}
	if opts.WebhookOnly && opts.Webhook == nil {
		return errors.New("--webhook-only serves the webhook: it cannot go with --enable-webhook=false")
	}
	return nil
}

// setMemoryLimit sets a soft Go memory limit at 90% of the container's memory limit
// (GOMEMLIMIT, when set, wins): the garbage collector works harder as the heap nears it, instead
// of letting RSS grow to twice the live heap and the pod be OOM-killed. No container limit, no
// soft limit.
func setMemoryLimit(log logr.Logger) {
	if limit, err := memlimit.Set(memlimit.WithRatio(0.9)); err != nil {
		log.Info("could not read the container's memory limit; no Go memory limit set", "reason", err.Error())
	} else if limit < math.MaxInt64 {
		log.Info("Go memory limit", "bytes", limit)
	}
}

// run builds the manager and serves until a signal; it logs why it stopped.
func run(opts manager.Options, qps float32, burst int, log logr.Logger) error {
	tp, flushTraces, err := tracing.Setup(context.Background(), "agent-sandbox-controller", func(err error) { log.Error(err, "tracing") })
	if err != nil {
		log.Error(err, "setting up tracing")
		return err
	}
	defer flushTraces()
	opts.TracerProvider = tp
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "loading kubeconfig")
		return err
	}
	cfg.QPS, cfg.Burst = qps, burst
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		log.Error(err, "building manager")
		return err
	}
	log.Info("starting manager", "metrics", opts.MetricsAddr, "probes", opts.ProbeAddr, "leaderElection", opts.LeaderElection)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager exited")
		return err
	}
	return nil
}

// parseLabels reads --router-pod-labels (k=v,k2=v2) with the API's own label rules.
func parseLabels(s string) (map[string]string, error) {
	set, err := labels.ConvertSelectorToLabelsMap(s)
	if err != nil {
		return nil, err
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("at least one label is required")
	}
	return set, nil
}

// loadScopedSigner reads the scoped-token secret; surrounding whitespace is dropped, as the
// router does, so both sides sign with the same bytes.
func loadScopedSigner(path string) (*scopedtoken.Signer, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return scopedtoken.NewSigner([]byte(strings.TrimSpace(string(b))))
}
