package router

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/router/watch"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Sentinel kinds of resolution failure; match them with errors.Is.
var (
	ErrNotFound = errors.New("sandbox not found")
	ErrNotReady = errors.New("sandbox not ready")
	// ErrRefused: the Sandbox is never routed to, whatever its state (it uses host networking).
	ErrRefused = errors.New("sandbox not routable")
	// ErrUnclaimed: the Sandbox is a warm pool member that no claim has taken yet.
	ErrUnclaimed = errors.New("sandbox is an unclaimed warm pool member")
)

// ResolveError says why a Sandbox cannot be routed to. Kind is ErrNotFound, ErrNotReady,
// ErrRefused or ErrUnclaimed.
type ResolveError struct {
	Kind      error
	Namespace string
	Name      string
	// Reason, for ErrNotReady: the Ready condition's reason, or why the IP is unusable; for
	// ErrRefused: why the Sandbox is never routed to.
	Reason string
}

func (e *ResolveError) Error() string {
	switch {
	case errors.Is(e.Kind, ErrNotFound):
		return fmt.Sprintf("sandbox %s/%s not found", e.Namespace, e.Name)
	case errors.Is(e.Kind, ErrUnclaimed):
		return fmt.Sprintf("sandbox %s/%s is an unclaimed warm pool member; it is routable once a SandboxClaim takes it", e.Namespace, e.Name)
	case errors.Is(e.Kind, ErrRefused) && e.Reason == reasonHostNetwork:
		return fmt.Sprintf("sandbox %s/%s uses the node's network (hostNetwork); the router never routes to it", e.Namespace, e.Name)
	case errors.Is(e.Kind, ErrRefused):
		return fmt.Sprintf("sandbox %s/%s is not routable (%s)", e.Namespace, e.Name, e.Reason)
	case e.Reason == "":
		return fmt.Sprintf("sandbox %s/%s is not ready", e.Namespace, e.Name)
	}
	return fmt.Sprintf("sandbox %s/%s is not ready (%s)", e.Namespace, e.Name, e.Reason)
}

func (e *ResolveError) Unwrap() error { return e.Kind }

// Target is what routing knows of a Sandbox: the address its pod is dialled at, and what the
// proxy checks a request against.
type Target struct {
	// Addr is valid only when Resolve returned no error.
	Addr netip.Addr
	// UID is the Sandbox's metadata.uid; scoped tokens bind it.
	UID types.UID
	// Ports are the TCP ports the Sandbox's containers declare (init containers excluded), sorted
	// and without duplicates. Shared: read only.
	Ports []uint16
	// SessionEnv is the value of the sandboxd header wire.HeaderSessionEnv: the env of the claim
	// that took the Sandbox warm (its agents.x-k8s.io/session-env annotation); "" for none.
	SessionEnv string
	// Wakes: a request resumes the Sandbox while it is paused (wake on request), and waits while
	// it starts. Paused: its replicas are 0.
	Wakes  bool
	Paused bool
	// ResourceVersion is the Sandbox's, for a resume that must not act on a newer state.
	ResourceVersion string
	// IdleWatched: the Sandbox pauses itself when idle, so requests to the pod's other ports are
	// reported to sandboxd as activity.
	IdleWatched bool
}

// Declares reports whether the Sandbox's containers declare port.
func (t Target) Declares(port uint16) bool {
	_, ok := slices.BinarySearch(t.Ports, port)
	return ok
}

// Resolver maps a Sandbox to the address of its pod. It must answer from memory: it runs on
// every request. With ErrRefused, ErrUnclaimed and ErrNotReady (except while the cache is
// syncing) the Sandbox is known, and the Target it returns carries its UID and Ports.
type Resolver interface {
	Resolve(namespace, name string) (Target, error)
}

// changeNotifier is a Resolver that can say when a Sandbox's answer may have changed, so that a
// request can wait for the watch instead of answering from a moment-old view.
type changeNotifier interface {
	// Changed returns a channel closed at the next event for namespace/name.
	Changed(namespace, name string) <-chan struct{}
}

// Reasons the cache reports for Sandboxes it will not route to beyond the Ready condition's own.
const (
	reasonNoReadyCondition = "ReadyConditionMissing"
	reasonTerminating      = "SandboxTerminating"
	reasonInvalidPodIP     = "InvalidPodIP"
	reasonCacheSyncing     = "RouterCacheSyncing"
	reasonHostNetwork      = "HostNetwork"
	reasonBadSessionEnv    = "InvalidSessionEnv"
)

// warmPoolKind is the controller owner of a pool member no claim has taken yet; a claim takes
// a member by making itself the controller owner.
const warmPoolKind = "SandboxWarmPool"

type cacheKey struct{ namespace, name string }

type cacheEntry struct {
	addr   netip.Addr // valid only when kind == nil
	kind   error      // nil: routable; else ErrNotReady, ErrRefused or ErrUnclaimed
	reason string
	uid    types.UID
	ports  []uint16
	env    string // Target.SessionEnv
	wakes  bool   // Target.Wakes
	paused bool   // Target.Paused
	rv     string // Target.ResourceVersion
	idle   bool   // Target.IdleWatched
}

// SandboxCache is the router's in-memory view of Sandboxes, fed by informer events. It keeps
// only what routing needs per Sandbox: one address or why there is none, its UID and its
// declared ports.
type SandboxCache struct {
	allowLoopback bool

	mu      sync.RWMutex
	entries map[cacheKey]cacheEntry
	// namespaces counts entries per namespace: metrics label requests with a namespace only
	// when it holds a Sandbox, so a caller cannot mint label values.
	namespaces map[string]int
	// waiters are closed at the next event for their key (see Changed); few, short-lived.
	waiters map[cacheKey]chan struct{}

	synced atomic.Pointer[func() bool]
}

var _ toolscache.ResourceEventHandler = (*SandboxCache)(nil)
var _ Resolver = (*SandboxCache)(nil)
var _ changeNotifier = (*SandboxCache)(nil)

// NewSandboxCache returns an empty cache. allowLoopback lets it route to 127.0.0.0/8 and ::1
// pod IPs, which only tests on one machine need.
func NewSandboxCache(allowLoopback bool) *SandboxCache {
	return &SandboxCache{allowLoopback: allowLoopback, entries: make(map[cacheKey]cacheEntry),
		namespaces: make(map[string]int), waiters: make(map[cacheKey]chan struct{})}
}

// Resolve implements Resolver.
func (c *SandboxCache) Resolve(namespace, name string) (Target, error) {
	c.mu.RLock()
	e, ok := c.entries[cacheKey{namespace, name}]
	c.mu.RUnlock()
	if !ok {
		// Before the initial list lands "unknown" means "not seen yet", not "absent".
		if !c.HasSynced() {
			return Target{}, &ResolveError{Kind: ErrNotReady, Namespace: namespace, Name: name, Reason: reasonCacheSyncing}
		}
		return Target{}, &ResolveError{Kind: ErrNotFound, Namespace: namespace, Name: name}
	}
	t := Target{UID: e.uid, Ports: e.ports, SessionEnv: e.env, Wakes: e.wakes, Paused: e.paused, ResourceVersion: e.rv, IdleWatched: e.idle}
	if e.kind != nil {
		return t, &ResolveError{Kind: e.kind, Namespace: namespace, Name: name, Reason: e.reason}
	}
	t.Addr = e.addr
	return t, nil
}

// Changed implements changeNotifier. A channel nobody waits on any more stays until the next
// event for its Sandbox, the Sandbox's deletion included, so there are never more than
// Sandboxes.
func (c *SandboxCache) Changed(namespace, name string) <-chan struct{} {
	key := cacheKey{namespace, name}
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.waiters[key]
	if !ok {
		ch = make(chan struct{})
		c.waiters[key] = ch
	}
	return ch
}

// wakeLocked closes the waiters of key; c.mu must be held for writing.
func (c *SandboxCache) wakeLocked(key cacheKey) {
	if ch, ok := c.waiters[key]; ok {
		close(ch)
		delete(c.waiters, key)
	}
}

// Len is the number of Sandboxes known, for the cache size gauge.
func (c *SandboxCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

// HasNamespace reports whether the cache holds a Sandbox of namespace ns.
func (c *SandboxCache) HasNamespace(ns string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.namespaces[ns] > 0
}

// HasSynced reports whether the informer's initial list has been delivered to the cache. A cache
// fed by hand (tests) with no informer attached counts as synced.
func (c *SandboxCache) HasSynced() bool {
	f := c.synced.Load()
	return f == nil || (*f)()
}

// OnAdd implements toolscache.ResourceEventHandler.
func (c *SandboxCache) OnAdd(obj any, _ bool) { c.upsert(obj) }

// OnUpdate implements toolscache.ResourceEventHandler.
func (c *SandboxCache) OnUpdate(_, newObj any) { c.upsert(newObj) }

// OnDelete implements toolscache.ResourceEventHandler. A missed delete arrives as a tombstone.
func (c *SandboxCache) OnDelete(obj any) {
	ns, name, ok := watch.DeletedKey(obj)
	if !ok {
		return
	}
	key := cacheKey{ns, name}
	c.mu.Lock()
	if _, ok := c.entries[key]; ok {
		delete(c.entries, key)
		if c.namespaces[ns]--; c.namespaces[ns] == 0 {
			delete(c.namespaces, ns)
		}
	}
	c.wakeLocked(key)
	c.mu.Unlock()
}

func (c *SandboxCache) upsert(obj any) {
	sb, ok := obj.(*agentsv1beta1.Sandbox)
	if !ok {
		return
	}
	e := c.entryFor(sb)
	key := cacheKey{sb.Namespace, sb.Name}
	c.mu.Lock()
	if _, ok := c.entries[key]; !ok {
		c.namespaces[key.namespace]++
	}
	c.entries[key] = e
	c.wakeLocked(key)
	c.mu.Unlock()
}

// entryFor decides routability once per event, so Resolve is a map lookup.
func (c *SandboxCache) entryFor(sb *agentsv1beta1.Sandbox) cacheEntry {
	e := cacheEntry{uid: sb.UID, ports: declaredPorts(&sb.Spec.PodTemplate.Spec),
		wakes: sb.WakesOnRequest(), paused: sb.DesiredReplicas() == agentsv1beta1.PausedReplicas, rv: sb.ResourceVersion}
	_, e.idle = sb.Annotations[agentsv1beta1.IdleTimeoutAnnotation]
	notReady := func(reason string) cacheEntry {
		e.kind, e.reason = ErrNotReady, reason
		return e
	}
	switch {
	case sb.Spec.PodTemplate.Spec.HostNetwork:
		// The pod IP is the node's, and a Sandbox can declare any port: the kubelet's 10250 or
		// any other service of the node would be one header away.
		e.kind, e.reason = ErrRefused, reasonHostNetwork
		return e
	case unclaimedPoolMember(sb):
		e.kind = ErrUnclaimed
		return e
	case sb.DeletionTimestamp != nil:
		return notReady(reasonTerminating)
	}
	if raw, ok := sb.Annotations[agentsv1beta1.SessionEnvAnnotation]; ok {
		// Without its claim's env a command would run differently from what the claim asked:
		// better no command at all, with the reason.
		env, err := wire.ParseSessionEnv(raw)
		if err == nil {
			e.env, err = wire.EncodeSessionEnv(env)
		}
		if err != nil {
			e.kind, e.reason = ErrRefused, fmt.Sprintf("%s: annotation %s: %v", reasonBadSessionEnv, agentsv1beta1.SessionEnvAnnotation, err)
			return e
		}
	}
	cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	switch {
	case cond == nil:
		return notReady(reasonNoReadyCondition)
	case cond.Status != metav1.ConditionTrue:
		if cond.Reason == "" {
			return notReady("NotReady")
		}
		return notReady(cond.Reason)
	case len(sb.Status.PodIPs) == 0:
		return notReady(agentsv1beta1.ReasonPodNoIP)
	}
	addr, err := netip.ParseAddr(sb.Status.PodIPs[0])
	if err != nil || !c.dialable(addr) {
		return notReady(reasonInvalidPodIP)
	}
	e.addr = addr.Unmap()
	return e
}

// unclaimedPoolMember: the Sandbox's controller is a SandboxWarmPool (of any version of the
// extensions group), so it waits in a pool for a claim and belongs to nobody yet.
func unclaimedPoolMember(sb *agentsv1beta1.Sandbox) bool {
	ref := metav1.GetControllerOfNoCopy(sb)
	if ref == nil || ref.Kind != warmPoolKind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == extv1beta1.GroupVersion.Group
}

// declaredPorts are the TCP ports of the pod's containers, sorted, without duplicates. Init
// containers are left out: they are done, or sidecars, before the sandbox serves. UDP and SCTP
// ports are left out: the router speaks TCP only, and a UDP port is no promise of a TCP one.
func declaredPorts(spec *corev1.PodSpec) []uint16 {
	var ports []uint16
	for i := range spec.Containers {
		for _, p := range spec.Containers[i].Ports {
			if (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) && p.ContainerPort > 0 && p.ContainerPort <= 65535 {
				ports = append(ports, uint16(p.ContainerPort))
			}
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// dialable refuses addresses no pod should have. Status is written by the controller, but this
// keeps a bad status write from turning the router into a path to node-local or metadata
// endpoints (169.254.169.254 is link-local).
func (c *SandboxCache) dialable(a netip.Addr) bool {
	a = a.Unmap()
	if a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return false
	}
	if a.IsLoopback() {
		return c.allowLoopback
	}
	return true
}

// slimSandbox is the informer transform: the informer store keeps only the fields routing reads,
// so memory stays small with many Sandboxes (pod templates can be large). Of the spec that is
// hostNetwork and the declared TCP ports, merged into one nameless container; of the owners, the
// controller; of the annotations, the session's env and the idle pause's; spec.operatingMode.
func slimSandbox(obj any) (any, error) {
	sb, ok := obj.(*agentsv1beta1.Sandbox)
	if !ok {
		return obj, nil
	}
	slim := &agentsv1beta1.Sandbox{
		TypeMeta: sb.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              sb.Name,
			Namespace:         sb.Namespace,
			UID:               sb.UID,
			ResourceVersion:   sb.ResourceVersion,
			Generation:        sb.Generation,
			DeletionTimestamp: sb.DeletionTimestamp,
		},
		Status: agentsv1beta1.SandboxStatus{PodIPs: sb.Status.PodIPs},
	}
	if ref := metav1.GetControllerOfNoCopy(sb); ref != nil {
		slim.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	for _, k := range []string{agentsv1beta1.SessionEnvAnnotation, agentsv1beta1.IdleTimeoutAnnotation, agentsv1beta1.WakeOnRequestAnnotation} {
		if v, ok := sb.Annotations[k]; ok {
			if slim.Annotations == nil {
				slim.Annotations = map[string]string{}
			}
			slim.Annotations[k] = v
		}
	}
	slim.Spec.OperatingMode = sb.Spec.OperatingMode
	spec := &slim.Spec.PodTemplate.Spec
	spec.HostNetwork = sb.Spec.PodTemplate.Spec.HostNetwork
	if ports := declaredPorts(&sb.Spec.PodTemplate.Spec); len(ports) > 0 {
		c := corev1.Container{Ports: make([]corev1.ContainerPort, len(ports))}
		for i, p := range ports {
			c.Ports[i] = corev1.ContainerPort{ContainerPort: int32(p), Protocol: corev1.ProtocolTCP}
		}
		spec.Containers = []corev1.Container{c}
	}
	if cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); cond != nil {
		slim.Status.Conditions = []metav1.Condition{*cond}
	}
	return slim, nil
}

// Attach registers the cache on a new informer over Sandboxes (all namespaces when namespace is
// "") and returns the informer cache, which the caller runs with Start. HasSynced turns true once
// the initial list has been handled. It fails when the API has no Sandbox kind.
func (c *SandboxCache) Attach(ctx context.Context, cfg *rest.Config, namespace string) (crcache.Cache, error) {
	informers, synced, err := watch.Attach(ctx, cfg, namespace, &agentsv1beta1.Sandbox{}, agentsv1beta1.AddToScheme, slimSandbox, c)
	if err != nil {
		return nil, err
	}
	c.synced.Store(&synced)
	return informers, nil
}
