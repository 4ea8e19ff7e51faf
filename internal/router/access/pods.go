package access

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/agent-sandbox/agent-sandbox/internal/router/watch"
)

// PodIdentifier names the pod a connection comes from, by its source address.
type PodIdentifier interface {
	// Identify returns the ServiceAccount identity of the one live pod that owns addr; else
	// ErrNoPod, or an *ExcludedPodError for a pod of a namespace whose pods must send a token.
	Identify(addr netip.Addr) (*Identity, error)
}

// ErrNoPod is the answer for an address that names no pod (unknown, the node, a host-network
// pod, a pod not running, or two live pods).
var ErrNoPod = errors.New("the address names no pod")

// ExcludedPodError is the answer for the address of a pod of a namespace that never gets a
// tokenless identity (--identify-pods-exclude-namespaces): the system's own pods hold rights on
// every Sandbox (the controller's ServiceAccount holds the router's held rights everywhere), so
// whoever spoofed such a pod's address would reach every sandbox.
type ExcludedPodError struct{ Namespace string }

func (e *ExcludedPodError) Error() string {
	return "pods of namespace " + e.Namespace + " are never named by their address"
}

// DefaultExcludedNamespaces are the namespaces whose pods never get a tokenless identity, beside
// the router's own namespace.
var DefaultExcludedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

type podKey struct{ namespace, name string }

type podEntry struct {
	serviceAccount string
	addrs          []netip.Addr // empty: the pod does not count (host network, not Running, ...)
}

// PodCache maps pod IPs to pods, fed by a watch of slim pods. Only IPs the CNI assigned count:
// a host-network pod's IP is its node's, shared with every other host-network pod and the node.
type PodCache struct {
	// allowLoopback counts 127.0.0.0/8 and ::1 pod IPs (single-machine tests only). Otherwise a
	// loopback source, such as a port-forward into the router's pod, never names a pod.
	allowLoopback bool
	// excluded: namespaces whose pods are never named (ExcludedPodError).
	excluded map[string]bool

	mu     sync.RWMutex
	pods   map[podKey]podEntry
	byIP   map[netip.Addr]map[podKey]struct{}
	synced atomic.Pointer[func() bool]
}

var _ toolscache.ResourceEventHandler = (*PodCache)(nil)
var _ PodIdentifier = (*PodCache)(nil)

// NewPodCache returns an empty cache; allowLoopback as in NewSandboxCache. Pods of the
// excluded namespaces are kept (their addresses still count as taken) but never named.
func NewPodCache(allowLoopback bool, excludeNamespaces ...string) *PodCache {
	c := &PodCache{allowLoopback: allowLoopback, excluded: make(map[string]bool, len(excludeNamespaces)),
		pods: make(map[podKey]podEntry), byIP: make(map[netip.Addr]map[podKey]struct{})}
	for _, ns := range excludeNamespaces {
		c.excluded[ns] = true
	}
	return c
}

// Identify implements PodIdentifier. An address two live pods claim (a stale status during IP
// reuse, or a spoofing attempt) names neither.
func (c *PodCache) Identify(addr netip.Addr) (*Identity, error) {
	addr = addr.Unmap()
	c.mu.RLock()
	defer c.mu.RUnlock()
	owners := c.byIP[addr]
	if len(owners) != 1 {
		return nil, ErrNoPod
	}
	for k := range owners {
		if c.excluded[k.namespace] {
			return nil, &ExcludedPodError{Namespace: k.namespace}
		}
		e := c.pods[k]
		return podIdentity(k.namespace, e.serviceAccount, k.name), nil
	}
	return nil, ErrNoPod
}

// podIdentity is the user the API server gives the pod's ServiceAccount token.
func podIdentity(namespace, serviceAccount, pod string) *Identity {
	return &Identity{Pod: namespace + "/" + pod, User: authnv1.UserInfo{
		Username: "system:serviceaccount:" + namespace + ":" + serviceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}}
}

// HasSynced reports whether the initial pod list has been handled; a cache without an informer
// (tests) counts as synced.
func (c *PodCache) HasSynced() bool {
	f := c.synced.Load()
	return f == nil || (*f)()
}

// Len is the number of pods known.
func (c *PodCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.pods)
}

// OnAdd implements toolscache.ResourceEventHandler.
func (c *PodCache) OnAdd(obj any, _ bool) { c.upsert(obj) }

// OnUpdate implements toolscache.ResourceEventHandler.
func (c *PodCache) OnUpdate(_, newObj any) { c.upsert(newObj) }

// OnDelete implements toolscache.ResourceEventHandler.
func (c *PodCache) OnDelete(obj any) {
	ns, name, ok := watch.DeletedKey(obj)
	if !ok {
		return
	}
	key := podKey{ns, name}
	c.mu.Lock()
	c.removeLocked(key)
	c.mu.Unlock()
}

func (c *PodCache) upsert(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := podKey{p.Namespace, p.Name}
	e := podEntry{serviceAccount: p.Spec.ServiceAccountName, addrs: identifyingAddrs(p, c.allowLoopback)}
	if e.serviceAccount == "" {
		e.serviceAccount = "default"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
	c.pods[key] = e
	for _, a := range e.addrs {
		owners := c.byIP[a]
		if owners == nil {
			owners = make(map[podKey]struct{}, 1)
			c.byIP[a] = owners
		}
		owners[key] = struct{}{}
	}
}

func (c *PodCache) removeLocked(key podKey) {
	old, ok := c.pods[key]
	if !ok {
		return
	}
	for _, a := range old.addrs {
		delete(c.byIP[a], key)
		if len(c.byIP[a]) == 0 {
			delete(c.byIP, a)
		}
	}
	delete(c.pods, key)
}

// identifyingAddrs are the pod's CNI-assigned IPs while it runs; none for a host-network pod or
// one that is not Running or is being deleted (its IP may already be another pod's).
func identifyingAddrs(p *corev1.Pod, allowLoopback bool) []netip.Addr {
	if p.Spec.HostNetwork || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return nil
	}
	var out []netip.Addr
	for _, ip := range p.Status.PodIPs {
		a, err := netip.ParseAddr(ip.IP)
		if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsLinkLocalUnicast() || (a.IsLoopback() && !allowLoopback) {
			continue
		}
		out = append(out, a.Unmap())
	}
	return out
}

// slimPod keeps only what identification reads, so a cluster-wide pod watch stays small.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   corev1.PodSpec{ServiceAccountName: p.Spec.ServiceAccountName, HostNetwork: p.Spec.HostNetwork},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIPs: p.Status.PodIPs},
	}, nil
}

// Attach registers the cache on a new pod informer, cluster-wide (callers may run in any
// namespace) or of one namespace, and returns the informer cache, which the caller runs with
// Start.
func (c *PodCache) Attach(ctx context.Context, cfg *rest.Config, namespace string) (crcache.Cache, error) {
	// A router of one namespace (--namespace) names that namespace's pods only: a Role, not a
	// cluster-wide pod watch, is all it needs.
	informers, synced, err := watch.Attach(ctx, cfg, namespace, &corev1.Pod{}, corev1.AddToScheme, slimPod, c)
	if err != nil {
		return nil, err
	}
	c.synced.Store(&synced)
	return informers, nil
}
