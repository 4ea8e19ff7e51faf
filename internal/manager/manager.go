// Package manager builds the agent-sandbox controller manager: the scheme, the cache scoped to
// the objects we own, and the reconcilers. cmd/controller and the integration tests share it so
// that tests exercise the wiring that ships.
package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	extensionsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extensionsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/autoscale"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/conversion"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/fqdnpolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
	ctrlmetrics "github.com/agent-sandbox/agent-sandbox/internal/controller/metrics"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/pacer"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/routertoken"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandbox"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxclaim"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxtemplate"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxwarmpool"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

// Options configures the manager. The zero value is usable: no metrics or probe listeners,
// no leader election.
type Options struct {
	MetricsAddr string // "0" or "" disables
	// MetricsAuth lets only callers the API server allows get on the non-resource URL /metrics
	// read the metrics (TokenReview, then SubjectAccessReview; the ClusterRole
	// agent-sandbox-metrics-reader grants it). Off: anyone who reaches the port reads them.
	MetricsAuth      bool
	ProbeAddr        string // "" disables
	LeaderElection   bool
	LeaderElectionID string
	LeaderElectionNS string
	// Lease timings (controller-runtime's defaults when zero: 15s, 10s, 2s). A killed leader's
	// lease must expire before a standby takes over, so LeaseDuration bounds failover time.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	ClusterDomain                             string
	SandboxWorkers                            int
	ClaimWorkers                              int
	SkipNameValidation                        bool // tests start several managers in one process
	// Router is who may reach sandboxes under a template's default NetworkPolicy.
	Router sandboxtemplate.RouterPeer
	// Network names the cluster DNS and the link-local prefixes admins open in every Sandbox's
	// NetworkPolicy; its router fields are taken from Router. Zero DNS fields take
	// egresspolicy.DefaultPeers'; no DNSServiceIPs: the kube-dns Service's, looked up at start.
	Network egresspolicy.Peers
	// EgressDomainsEngine enforces domain allow-lists: auto (the default when empty: Cilium's
	// CiliumNetworkPolicy when the API serves it at start), cilium, or none.
	EgressDomainsEngine fqdnpolicy.Engine
	// MemberReadyTimeout is how long a warm pool member may stay not Ready before it is
	// replaced (default sandboxwarmpool.DefaultMemberReadyTimeout).
	MemberReadyTimeout time.Duration
	// DefaultRuntimeClass is the runtimeClassName of pods made from templates that name none
	// (e.g. "gvisor"); empty leaves them on the node's default runtime. Raw Sandboxes keep
	// their own spec.
	DefaultRuntimeClass string
	// RefillQuiet is how long pool refills wait after the last claim (default 250ms).
	RefillQuiet time.Duration
	// RefillMaxHold is the longest pool refills and the Sandbox controller's label bookkeeping
	// wait for claims to go quiet at a stretch (default pacer.DefaultMaxHold, 2s): under a
	// claim stream that is never quiet, work still goes through this often.
	RefillMaxHold time.Duration
	// PprofAddr serves net/http/pprof when set (profiling the hot path in benchmarks).
	PprofAddr string
	// Activity, when set, is how the idle pause learns what sandboxd sees (through the router);
	// nil: Sandboxes with agents.x-k8s.io/idle-timeout are never paused.
	Activity sandbox.ActivitySource
	// NodeAgents, when set, save and restore the memory of KeepMemory Sandboxes
	// (docs/snapshots.md); nil: their pauses delete the pod as every other.
	NodeAgents sandbox.NodeAgents
	// ScopedTokens, when set, mints router tokens scoped to one Sandbox for claims that ask
	// (annotation agents.x-k8s.io/router-token: "true"); the router verifies them with the same secret.
	ScopedTokens *scopedtoken.Signer
	// TracerProvider traces claims as they start (docs/tracing.md); nil: off.
	TracerProvider trace.TracerProvider
	// Webhook serves the CRD conversion webhook (v1beta1 ⇄ v1alpha1) when set.
	Webhook *conversion.Options
	// WebhookOnly runs the conversion webhook (and its certificate rotation) and nothing else:
	// no reconcilers, no leader election. The install runs it beside each controller, in a
	// container of its own, so that a controller that crashes leaves the webhook serving.
	WebhookOnly bool
}

// NewScheme returns a scheme with the core Kubernetes kinds and ours.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, agentsv1alpha1.AddToScheme, extensionsv1alpha1.AddToScheme,
		agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// New builds a manager with every reconciler registered.
func New(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	if opts.WebhookOnly && opts.Webhook == nil {
		return nil, errors.New("a webhook-only manager needs the webhook")
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, managerOptions(opts, scheme))
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if opts.WebhookOnly {
		return mgr, addWebhookAndProbes(mgr, opts)
	}
	enforceDomains, err := resolveDomainsEngine(cfg, opts.EgressDomainsEngine)
	if err != nil {
		return nil, err
	}
	if err := index.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("registering cache indexes: %w", err)
	}
	if err := addReconcilers(mgr, opts, enforceDomains); err != nil {
		return nil, err
	}
	collector := ctrlmetrics.NewSandboxCollector(mgr.GetClient(), mgr.Elected(), mgr.GetLogger().WithName("sandbox-metrics"))
	if err := ctrlmetrics.RegisterSandboxCollector(crmetrics.Registry, collector); err != nil {
		return nil, fmt.Errorf("registering the agent_sandboxes collector: %w", err)
	}
	if err := warmInformers(mgr, enforceDomains); err != nil {
		return nil, err
	}
	if err := addWebhookAndProbes(mgr, opts); err != nil {
		return nil, err
	}
	return mgr, nil
}

// managerOptions is the controller-runtime configuration of the manager opts describe.
func managerOptions(opts Options, scheme *runtime.Scheme) ctrl.Options {
	metricsAddr := opts.MetricsAddr
	if metricsAddr == "" {
		metricsAddr = "0"
	}
	leaderID := opts.LeaderElectionID
	if leaderID == "" {
		leaderID = "agent-sandbox-controller.agents.x-k8s.io"
	}
	mgrOpts := ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       MetricsServerOptions(metricsAddr, opts.MetricsAuth),
		PprofBindAddress:              opts.PprofAddr,
		HealthProbeBindAddress:        opts.ProbeAddr,
		LeaderElection:                opts.LeaderElection && !opts.WebhookOnly,
		LeaderElectionID:              leaderID,
		LeaderElectionNamespace:       opts.LeaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 nonZero(opts.LeaseDuration),
		RenewDeadline:                 nonZero(opts.RenewDeadline),
		RetryPeriod:                   nonZero(opts.RetryPeriod),
		Cache:                         cacheOptions(),
		Client: client.Options{Cache: &client.CacheOptions{
			// Events are written, never read; don't start an informer for them.
			DisableFor: []client.Object{&corev1.Event{}},
			// The one unstructured kind, CiliumNetworkPolicy, is read from the cache too.
			Unstructured: true,
		}},
	}
	if opts.SkipNameValidation {
		skip := true
		mgrOpts.Controller.SkipNameValidation = &skip
	}
	return mgrOpts
}

// MetricsServerOptions serve /metrics on addr; with auth, to callers the API server authenticates
// (TokenReview) and allows get on the non-resource URL /metrics (SubjectAccessReview), as
// controller-runtime's filter does. Metrics name every tenant's namespaces and claims. (The RBAC
// markers of those reviews are in internal/controller/metrics.)
func MetricsServerOptions(addr string, auth bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if auth {
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

// addReconcilers registers every reconciler, sharing the claim pacer and the pod metadata rules.
func addReconcilers(mgr ctrl.Manager, opts Options, enforceDomains bool) error {
	claims := pacer.NewPacer(opts.RefillQuiet, clock.RealClock{})
	peers := networkPeers(mgr.GetAPIReader(), opts, opts.Router.OrDefault())
	// One set of pod metadata rules for every controller that builds sandbox pods.
	templates := sandboxtemplate.New(mgr.GetClient(), sandboxtemplate.Options{
		Recorder:       mgr.GetEventRecorderFor("sandboxtemplate-controller"),
		Router:         opts.Router,
		Network:        &peers,
		EnforceDomains: enforceDomains,
	})
	podRules := templates.PodRules()
	// One builder for warm and cold Sandboxes, so both are made the same.
	builder := blueprint.Builder{PodRules: podRules, RuntimeClassName: opts.DefaultRuntimeClass}
	if err := sandbox.New(mgr.GetClient(), mgr.GetAPIReader(), sandbox.Options{
		Recorder:       mgr.GetEventRecorderFor("sandbox-controller"),
		ClusterDomain:  opts.ClusterDomain,
		Workers:        opts.SandboxWorkers,
		Gate:           pacer.NewGate(claims, opts.RefillMaxHold),
		PodRules:       podRules,
		Hardening:      builder,
		Peers:          &peers,
		Activity:       opts.Activity,
		EnforceDomains: enforceDomains,
		NodeAgents:     opts.NodeAgents,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up sandbox controller: %w", err)
	}
	if err := templates.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up sandboxtemplate controller: %w", err)
	}
	// Claims counted per pool by the claim controller size the autoscaled pools.
	demand := autoscale.NewDemand(nil)
	if err := sandboxwarmpool.New(mgr.GetClient(), sandboxwarmpool.Options{
		Recorder:           mgr.GetEventRecorderFor("sandboxwarmpool-controller"),
		Gate:               pacer.NewGate(claims, opts.RefillMaxHold),
		Blueprint:          builder,
		MemberReadyTimeout: opts.MemberReadyTimeout,
		Demand:             demand,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up sandboxwarmpool controller: %w", err)
	}
	if err := sandboxclaim.New(mgr.GetClient(), mgr.GetAPIReader(), sandboxclaim.Options{
		Recorder:       mgr.GetEventRecorderFor("sandboxclaim-controller"),
		Pacer:          claims,
		Workers:        opts.ClaimWorkers,
		Blueprint:      builder,
		TracerProvider: opts.TracerProvider,
		Demand:         demand,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up sandboxclaim controller: %w", err)
	}
	if opts.ScopedTokens != nil {
		if err := routertoken.New(mgr.GetClient(), mgr.GetAPIReader(), opts.ScopedTokens, routertoken.Options{}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up routertoken controller: %w", err)
		}
	}
	return nil
}

// watchedKinds are the kinds the reconcilers watch.
var watchedKinds = []client.Object{
	&agentsv1beta1.Sandbox{}, &extensionsv1beta1.SandboxClaim{}, &extensionsv1beta1.SandboxWarmPool{},
	&extensionsv1beta1.SandboxTemplate{}, &corev1.Pod{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{},
	&networkingv1.NetworkPolicy{},
}

// warmInformers registers an informer for every watched kind with the cache, which starts
// before leader election: a standby replica then holds a synced copy of everything, and a newly
// elected leader starts serving claims at once instead of first listing every pod and service
// from an API server that may be under load (controllers otherwise open their informers only
// once elected).
func warmInformers(mgr ctrl.Manager, enforceDomains bool) error {
	kinds := watchedKinds
	if enforceDomains {
		kinds = append(slices.Clip(kinds), fqdnpolicy.Empty())
	}
	for _, obj := range kinds {
		if _, err := mgr.GetCache().GetInformer(context.Background(), obj); err != nil {
			return fmt.Errorf("registering the %T informer: %w", obj, err)
		}
	}
	return nil
}

// resolveDomainsEngine asks the API, once, whether domain allow-lists can be enforced.
func resolveDomainsEngine(cfg *rest.Config, engine fqdnpolicy.Engine) (bool, error) {
	if engine == "" {
		engine = fqdnpolicy.EngineAuto
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	enforce, err := fqdnpolicy.Resolve(engine, dc)
	if err != nil {
		return false, fmt.Errorf("egress domains: %w", err)
	}
	ctrl.Log.WithName("setup").Info("egress domain allow-lists", "engine", engine, "enforcedWithCiliumNetworkPolicies", enforce)
	return enforce, nil
}

// addWebhookAndProbes serves the conversion webhook when asked, and the health probes; the
// webhook's readiness is part of /readyz.
func addWebhookAndProbes(mgr ctrl.Manager, opts Options) error {
	webhookReady := healthz.Ping
	if opts.Webhook != nil {
		var err error
		if webhookReady, err = conversion.Setup(mgr, *opts.Webhook); err != nil {
			return fmt.Errorf("setting up the conversion webhook: %w", err)
		}
	}
	if opts.ProbeAddr == "" {
		return nil
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("conversion-webhook", webhookReady)
}

// cacheOptions limits the pod, service and PVC informers to objects a Sandbox made, so that the
// controller's memory follows the number of sandboxes, not the size of the cluster.
func cacheOptions() cache.Options {
	tracked, err := labels.NewRequirement(agentsv1beta1.SandboxNameHashLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key; cannot fail
	}
	byTracking := cache.ByObject{Label: labels.NewSelector().Add(*tracked)}
	pods := byTracking
	pods.Transform = slimPod
	return cache.Options{
		// managedFields are never read here and are a large share of every cached object; with
		// thousands of Sandboxes resident they would be most of the controller's memory.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   pods,
			&corev1.Service{}:               byTracking,
			&corev1.PersistentVolumeClaim{}: byTracking,
		}}
}

// slimPod keeps what the controllers read of a pod — metadata, status and the node it runs on —
// and drops the spec, the bulk of a pod's memory: with thousands of sandboxes resident, the
// pod cache would otherwise hold every container spec twice (once more in each Sandbox).
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName}
	return pod, nil
}

// nonZero is d as a pointer, or nil (the library's default) when d is zero.
func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}
