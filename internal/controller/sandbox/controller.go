// Package sandbox reconciles a Sandbox into its Pod, headless Service and PVCs, and reports
// their state in the Sandbox status.
package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/expectations"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/fqdnpolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/pacer"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/podmeta"
)

// DefaultClusterDomain is the DNS domain used in status.serviceFQDN unless configured.
const DefaultClusterDomain = "cluster.local"

// DefaultWorkers is how many Sandboxes are reconciled in parallel unless Options say otherwise.
const DefaultWorkers = 16

// Options configure a Reconciler; a zero field takes its default.
type Options struct {
	// Recorder receives events (default: dropped).
	Recorder record.EventRecorder
	// ClusterDomain is the DNS domain in status.serviceFQDN (default DefaultClusterDomain).
	ClusterDomain string
	// Workers bounds parallel reconciles (default DefaultWorkers).
	Workers int
	// Gate defers pod label bookkeeping while claims are being served (nil: never).
	Gate *pacer.Gate
	// PodRules keep the router's identifying labels off sandbox pods.
	PodRules podmeta.Rules
	// Hardening gives every pod the secure defaults and, to a raw Sandbox's, the default
	// runtime class (blueprint.Builder.HardenPod).
	Hardening blueprint.Builder
	// Peers are the router, cluster DNS and allowed link-local ranges every Sandbox's
	// NetworkPolicy names (default egresspolicy.DefaultPeers()).
	Peers *egresspolicy.Peers
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock
	// Activity reports what sandboxd sees, for the idle pause (nil: no Sandbox is paused for
	// being idle).
	Activity ActivitySource
	// EnforceDomains writes a CiliumNetworkPolicy for each Sandbox's domain allow-list (the
	// controller found Cilium at start); off, a Sandbox that lists domains gets no pod unless it
	// fails open.
	EnforceDomains bool
	// NodeAgents save and restore the memory of KeepMemory Sandboxes (nil: every pause deletes
	// the pod, as without the annotation).
	NodeAgents NodeAgents
}

// Reconciler drives one Sandbox: Pod (unless paused or expired), headless Service, PVCs, the
// egress NetworkPolicy its annotations ask for, status.
type Reconciler struct {
	client client.Client
	// apiReader reads around the cache, for objects the cache deliberately does not hold
	// (a same-named pod someone else created carries no tracking label).
	apiReader     client.Reader
	recorder      record.EventRecorder
	clusterDomain string
	workers       int
	gate          *pacer.Gate
	podRules      podmeta.Rules
	hardening     blueprint.Builder
	peers         egresspolicy.Peers
	clock         clock.PassiveClock
	activity      ActivitySource
	// enforceDomains: domain allow-lists become CiliumNetworkPolicies (domains.go).
	enforceDomains bool
	nodeAgents     NodeAgents
	// watchedSince: when each Sandbox was first seen eligible for the idle pause (idle.go).
	watchedSince sync.Map
	// createdPods remember, per Sandbox (and its UID), the pod this process created until the
	// cache shows it, so a reconcile woken by another child's event does not create it twice.
	createdPods *expectations.Store[types.UID, *corev1.Pod]
	// createdServices and createdPolicies do the same for the Service and the NetworkPolicy:
	// under load the pod's event can come before theirs, and a second create costs a 409.
	createdServices *expectations.Store[types.UID, *corev1.Service]
	createdPolicies *expectations.Store[types.UID, *networkingv1.NetworkPolicy]
	// writtenStatus remembers the status this process last wrote, until the cache shows it.
	writtenStatus *expectations.Store[types.UID, agentsv1beta1.SandboxStatus]
}

// New returns a Sandbox reconciler that reads through c (the cache) and, for objects the cache
// does not hold, apiReader.
func New(c client.Client, apiReader client.Reader, opts Options) *Reconciler {
	r := &Reconciler{
		client: c, apiReader: apiReader, recorder: opts.Recorder, clusterDomain: opts.ClusterDomain,
		workers: opts.Workers, gate: opts.Gate, podRules: opts.PodRules, hardening: opts.Hardening, clock: opts.Clock, activity: opts.Activity,
		enforceDomains: opts.EnforceDomains, nodeAgents: opts.NodeAgents,
	}
	if r.recorder == nil {
		r.recorder = &record.FakeRecorder{} // drops events (its channel is nil)
	}
	if r.clusterDomain == "" {
		r.clusterDomain = DefaultClusterDomain
	}
	if r.workers <= 0 {
		r.workers = DefaultWorkers
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	r.peers = egresspolicy.DefaultPeers()
	if opts.Peers != nil {
		r.peers = *opts.Peers
	}
	r.createdPods = expectations.New[types.UID, *corev1.Pod](r.clock, expectations.CacheLag)
	r.createdServices = expectations.New[types.UID, *corev1.Service](r.clock, expectations.CacheLag)
	r.createdPolicies = expectations.New[types.UID, *networkingv1.NetworkPolicy](r.clock, expectations.CacheLag)
	r.writtenStatus = expectations.New[types.UID, agentsv1beta1.SandboxStatus](r.clock, expectations.CacheLag)
	return r
}

// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Reconcile brings the children of one Sandbox in line with its spec and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sb := &agentsv1beta1.Sandbox{}
	if err := r.client.Get(ctx, req.NamespacedName, sb); err != nil {
		if apierrors.IsNotFound(err) {
			r.createdPods.Forget(req.NamespacedName)
			r.createdServices.Forget(req.NamespacedName)
			r.createdPolicies.Forget(req.NamespacedName)
			r.writtenStatus.Forget(req.NamespacedName)
			r.watchedSince.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sb.DeletionTimestamp.IsZero() {
		// Children go with it through garbage collection.
		return ctrl.Result{}, nil
	}
	original := sb.DeepCopy()
	now := r.clock.Now()

	if expired(sb, now) {
		return r.reconcileExpired(ctx, sb, original)
	}

	obs, err := r.reconcileChildren(ctx, sb)
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		// The namespace is going away and takes the sandbox with it; nothing to fix.
		log.FromContext(ctx).V(2).Info("namespace is terminating; not creating children")
		return ctrl.Result{}, nil
	}
	setStatus(sb, obs, err, r.clusterDomain)
	if serr := r.writeStatus(ctx, original, sb, obs); serr != nil {
		return ctrl.Result{}, serr
	}
	r.warnIfIdleTimeoutInvalid(original, sb)
	if err != nil {
		return ctrl.Result{}, err
	}
	after, why := untilExpiry(sb, now), "expiry"
	if obs.podMetadataDue > 0 && (after == 0 || obs.podMetadataDue < after) {
		after, why = obs.podMetadataDue, "pod metadata update held back while claims are served"
	}
	idleAfter, err := r.reconcileIdle(ctx, sb)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if idleAfter > 0 && (after == 0 || idleAfter < after) {
		after, why = idleAfter, "next idle check"
	}
	if after > 0 {
		log.FromContext(ctx).V(2).Info("requeue", "after", after, "why", why)
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// observed is what the children looked like after this reconcile's writes.
type observed struct {
	pod            *corev1.Pod // owned pod, nil when none
	podNotOwned    bool        // a pod with the sandbox's name exists and is not ours
	service        *corev1.Service
	serviceProblem string // why there is no service, when there is none
	egress         egressState
	podMetadataDue time.Duration // a pod metadata update the gate held back is due in this long
}

func (r *Reconciler) reconcileChildren(ctx context.Context, sb *agentsv1beta1.Sandbox) (observed, error) {
	var obs observed
	if err := r.reconcilePVCs(ctx, sb); err != nil {
		return obs, fmt.Errorf("persistent volume claims: %w", err)
	}
	svc, problem, err := r.reconcileService(ctx, sb)
	if err != nil {
		return obs, fmt.Errorf("service: %w", err)
	}
	obs.service, obs.serviceProblem = svc, problem
	// The NetworkPolicy comes before the pod, so the pod never takes or sends a packet without it.
	eg, err := r.reconcileEgress(ctx, sb)
	obs.egress = eg
	if err != nil {
		return obs, fmt.Errorf("egress NetworkPolicy: %w", err)
	}
	pod, notOwned, due, err := r.reconcilePod(ctx, sb, !eg.blocksPod())
	obs.pod, obs.podNotOwned, obs.podMetadataDue = pod, notOwned, due
	if err != nil {
		return obs, fmt.Errorf("pod: %w", err)
	}
	return obs, nil
}

// SetupWithManager registers the reconciler; owned children re-trigger it, so deleting a child
// recreates it and pod state changes reach the status.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byOwner := expectations.ForgetOnDelete(
		handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &agentsv1beta1.Sandbox{}, handler.OnlyControllerOwner()),
		r.forgetDeletedChild)
	b := ctrl.NewControllerManagedBy(mgr)
	if r.gate != nil {
		// Sandboxes whose pod labels the gate held back during a claim burst come back when it opens.
		b = b.WatchesRawSource(r.gate.Release())
	}
	b = b.
		For(&agentsv1beta1.Sandbox{}).
		Watches(&corev1.Pod{}, byOwner).
		Watches(&corev1.Service{}, byOwner).
		Owns(&corev1.PersistentVolumeClaim{}).
		// By name, not owner: a policy of someone else's that blocked the name may go away.
		Watches(&networkingv1.NetworkPolicy{}, expectations.ForgetOnDelete(handler.EnqueueRequestsFromMapFunc(sameName), r.forgetDeletedChild))
	if r.enforceDomains {
		b = b.Watches(fqdnpolicy.Empty(), handler.EnqueueRequestsFromMapFunc(sameName))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: r.workers}).
		Named("sandbox").
		Complete(r)
}

// forgetDeletedChild drops the create expectation a deleted child answers, so a child deleted
// before the cache showed it is made again at once rather than trusted for expectations.CacheLag.
func (r *Reconciler) forgetDeletedChild(obj client.Object) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Sandbox" || !strings.HasPrefix(ref.APIVersion, agentsv1beta1.GroupVersion.Group+"/") {
		return
	}
	owner := types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}
	switch obj.(type) {
	case *corev1.Pod:
		expectations.Gone(r.createdPods, owner, obj.GetUID())
	case *corev1.Service:
		expectations.Gone(r.createdServices, owner, obj.GetUID())
	case *networkingv1.NetworkPolicy:
		expectations.Gone(r.createdPolicies, owner, obj.GetUID())
	}
}

// sameName maps an object to the Sandbox of the same name and namespace.
func sameName(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
}

func ignoreAlreadyExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
