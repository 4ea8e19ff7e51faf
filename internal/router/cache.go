package router

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// Sentinel kinds of resolution failure; match them with errors.Is.
var (
	ErrNotFound = errors.New("sandbox not found")
	ErrNotReady = errors.New("sandbox not ready")
)

// ResolveError says why a Sandbox cannot be routed to. Kind is ErrNotFound or ErrNotReady.
type ResolveError struct {
	Kind      error
	Namespace string
	Name      string
	Reason    string // for ErrNotReady: the Ready condition's reason, or why the IP is unusable
}

func (e *ResolveError) Error() string {
	if errors.Is(e.Kind, ErrNotFound) {
		return fmt.Sprintf("sandbox %s/%s not found", e.Namespace, e.Name)
	}
	if e.Reason == "" {
		return fmt.Sprintf("sandbox %s/%s is not ready", e.Namespace, e.Name)
	}
	return fmt.Sprintf("sandbox %s/%s is not ready (%s)", e.Namespace, e.Name, e.Reason)
}

func (e *ResolveError) Unwrap() error { return e.Kind }

// Target is the address a routable Sandbox is dialled at.
type Target struct {
	Addr netip.Addr
}

// Resolver maps a Sandbox to the address of its pod. It must answer from memory: it runs on
// every request.
type Resolver interface {
	Resolve(namespace, name string) (Target, error)
}

// Reasons the cache reports for Sandboxes it will not route to beyond the Ready condition's own.
const (
	reasonNoReadyCondition = "ReadyConditionMissing"
	reasonTerminating      = "SandboxTerminating"
	reasonInvalidPodIP     = "InvalidPodIP"
	reasonCacheSyncing     = "RouterCacheSyncing"
)

type cacheKey struct{ namespace, name string }

type cacheEntry struct {
	addr   netip.Addr // valid only when reason == ""
	reason string
}

// SandboxCache is the router's in-memory view of Sandboxes, fed by informer events. It keeps
// only what routing needs (one address or a not-ready reason) per Sandbox.
type SandboxCache struct {
	allowLoopback bool

	mu      sync.RWMutex
	entries map[cacheKey]cacheEntry

	synced atomic.Pointer[func() bool]
}

var _ toolscache.ResourceEventHandler = (*SandboxCache)(nil)
var _ Resolver = (*SandboxCache)(nil)

// NewSandboxCache returns an empty cache. allowLoopback lets it route to 127.0.0.0/8 and ::1
// pod IPs, which only tests on one machine need.
func NewSandboxCache(allowLoopback bool) *SandboxCache {
	return &SandboxCache{allowLoopback: allowLoopback, entries: make(map[cacheKey]cacheEntry)}
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
	if e.reason != "" {
		return Target{}, &ResolveError{Kind: ErrNotReady, Namespace: namespace, Name: name, Reason: e.reason}
	}
	return Target{Addr: e.addr}, nil
}

// Len is the number of Sandboxes known, for the cache size gauge.
func (c *SandboxCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
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
	var key cacheKey
	switch o := obj.(type) {
	case *v1alpha1.Sandbox:
		key = cacheKey{o.Namespace, o.Name}
	case toolscache.DeletedFinalStateUnknown:
		ns, name, err := toolscache.SplitMetaNamespaceKey(o.Key)
		if err != nil {
			return
		}
		key = cacheKey{ns, name}
	default:
		return
	}
	c.mu.Lock()
	delete(c.entries, key)
	c.mu.Unlock()
}

func (c *SandboxCache) upsert(obj any) {
	sb, ok := obj.(*v1alpha1.Sandbox)
	if !ok {
		return
	}
	e := c.entryFor(sb)
	c.mu.Lock()
	c.entries[cacheKey{sb.Namespace, sb.Name}] = e
	c.mu.Unlock()
}

// entryFor decides routability once per event, so Resolve is a map lookup.
func (c *SandboxCache) entryFor(sb *v1alpha1.Sandbox) cacheEntry {
	if sb.DeletionTimestamp != nil {
		return cacheEntry{reason: reasonTerminating}
	}
	cond := meta.FindStatusCondition(sb.Status.Conditions, v1alpha1.SandboxConditionReady)
	switch {
	case cond == nil:
		return cacheEntry{reason: reasonNoReadyCondition}
	case cond.Status != metav1.ConditionTrue:
		if cond.Reason == "" {
			return cacheEntry{reason: "NotReady"}
		}
		return cacheEntry{reason: cond.Reason}
	case len(sb.Status.PodIPs) == 0:
		return cacheEntry{reason: v1alpha1.ReasonPodNoIP}
	}
	addr, err := netip.ParseAddr(sb.Status.PodIPs[0])
	if err != nil || !c.dialable(addr) {
		return cacheEntry{reason: reasonInvalidPodIP}
	}
	return cacheEntry{addr: addr.Unmap()}
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
// so memory stays small with many Sandboxes (pod templates can be large).
func slimSandbox(obj any) (any, error) {
	sb, ok := obj.(*v1alpha1.Sandbox)
	if !ok {
		return obj, nil
	}
	slim := &v1alpha1.Sandbox{
		TypeMeta: sb.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              sb.Name,
			Namespace:         sb.Namespace,
			UID:               sb.UID,
			ResourceVersion:   sb.ResourceVersion,
			Generation:        sb.Generation,
			DeletionTimestamp: sb.DeletionTimestamp,
		},
		Status: v1alpha1.SandboxStatus{PodIPs: sb.Status.PodIPs},
	}
	if cond := meta.FindStatusCondition(sb.Status.Conditions, v1alpha1.SandboxConditionReady); cond != nil {
		slim.Status.Conditions = []metav1.Condition{*cond}
	}
	return slim, nil
}

// Attach registers the cache on a new informer over Sandboxes (all namespaces when namespace is
// "") and returns the informer cache, which the caller runs with Start. HasSynced turns true once
// the initial list has been handled. It fails when the API has no Sandbox kind.
func (c *SandboxCache) Attach(ctx context.Context, cfg *rest.Config, namespace string) (crcache.Cache, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	opts := crcache.Options{
		Scheme:   scheme,
		ByObject: map[client.Object]crcache.ByObject{&v1alpha1.Sandbox{}: {Transform: slimSandbox}},
	}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]crcache.Config{namespace: {}}
	}
	informers, err := crcache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating Sandbox cache: %w", err)
	}
	inf, err := informers.GetInformer(ctx, &v1alpha1.Sandbox{})
	if err != nil {
		return nil, fmt.Errorf("creating Sandbox informer: %w", err)
	}
	reg, err := inf.AddEventHandler(c)
	if err != nil {
		return nil, fmt.Errorf("registering Sandbox event handler: %w", err)
	}
	synced := reg.HasSynced
	c.synced.Store(&synced)
	return informers, nil
}
