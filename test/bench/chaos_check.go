package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// ownership remembers, from watch events, every claim that ever controlled each Sandbox and
// every Sandbox each claim's status ever named: more than one is a double adoption.
type ownership struct {
	mu        sync.Mutex
	ownersOf  map[string]map[types.UID]bool // sandbox -> controlling claim UIDs seen
	sandboxOf map[string]map[string]bool    // claim -> status.sandbox.name values seen
}

func newOwnership() *ownership {
	return &ownership{ownersOf: map[string]map[types.UID]bool{}, sandboxOf: map[string]map[string]bool{}}
}

func (o *ownership) watch(ctx context.Context, c cache.Cache) error {
	for _, obj := range []client.Object{&agentsv1beta1.Sandbox{}, &extv1beta1.SandboxClaim{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: o.observe, UpdateFunc: func(_, n any) { o.observe(n) },
		}); err != nil {
			return err
		}
	}
	return nil
}

func (o *ownership) observe(obj any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch v := obj.(type) {
	case *agentsv1beta1.Sandbox:
		if ref := metav1.GetControllerOf(v); ref != nil && ref.Kind == "SandboxClaim" {
			add(o.ownersOf, v.Name, ref.UID)
		}
	case *extv1beta1.SandboxClaim:
		if name := v.Status.SandboxStatus.Name; name != "" {
			add(o.sandboxOf, v.Name, name)
		}
	}
}

func add[K comparable](m map[string]map[K]bool, key string, v K) {
	if m[key] == nil {
		m[key] = map[K]bool{}
	}
	m[key][v] = true
}

// doubles counts Sandboxes ever controlled by two claims and claims ever bound to two
// Sandboxes, plus Sandboxes that two claims named at once.
func (o *ownership) doubles() (sandboxes, claims []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, owners := range o.ownersOf {
		if len(owners) > 1 {
			sandboxes = append(sandboxes, name)
		}
	}
	namedBy := map[string][]string{}
	for claim, names := range o.sandboxOf {
		if len(names) > 1 {
			claims = append(claims, claim)
		}
		for n := range names {
			namedBy[n] = append(namedBy[n], claim)
		}
	}
	for sb, by := range namedBy {
		if len(by) > 1 {
			sandboxes = append(sandboxes, fmt.Sprintf("%s (named by %v)", sb, by))
		}
	}
	sort.Strings(sandboxes)
	sort.Strings(claims)
	return sandboxes, claims
}

// pending is how many claims that exist (created, or seen though the create call failed) have
// no pod IPs yet.
func (r *recorder) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.claims {
		if (c.err == nil || c.seen) && c.podIPs.IsZero() {
			n++
		}
	}
	return n
}

// waitPoolSize waits for the pool to be back at size and says how long after since that was.
func waitPoolSize(ctx context.Context, c client.Client, size int, since time.Time) string {
	pool := &extv1beta1.SandboxWarmPool{}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: poolName}, pool); err == nil && int(pool.Status.ReadyReplicas) >= size {
			return time.Since(since).Round(100 * time.Millisecond).String()
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Sprintf("not back at %d within 3m (%d ready)", size, pool.Status.ReadyReplicas)
}

// cleanUpAndFindLeaks deletes every claim, scales the pool to 0, waits for garbage collection,
// and returns what is left that no live object owns: Sandboxes, Pods, Services, PVCs and
// NetworkPolicies (the template's own policy is owned by the live template, so not a leak).
func cleanUpAndFindLeaks(ctx context.Context, c client.Client) map[string]int {
	_ = c.DeleteAllOf(ctx, &extv1beta1.SandboxClaim{}, client.InNamespace(namespace))
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: poolName}}
	_ = c.Patch(ctx, pool, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`)))
	// Garbage collection of thousands of pods after a heavy run takes minutes; a list that fails
	// (an API server still busy) is asked again rather than counted.
	var leaks map[string]int
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if leaks = orphans(ctx, c); total(leaks) == 0 && !unknown(leaks) {
			return leaks
		}
		time.Sleep(2 * time.Second)
	}
	return leaks
}

// unknown reports a count that could not be taken (-1).
func unknown(m map[string]int) bool {
	for _, v := range m {
		if v < 0 {
			return true
		}
	}
	return false
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// orphans counts the namespace's objects of each kind that should be gone: every Sandbox, Pod,
// Service and PVC (nothing may remain once claims and pool are gone), and NetworkPolicies whose
// owner no longer exists.
func orphans(ctx context.Context, c client.Client) map[string]int {
	count := func(list client.ObjectList) int {
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return -1
		}
		return apimeta.LenList(list)
	}
	out := map[string]int{
		"sandboxes": count(&agentsv1beta1.SandboxList{}),
		"pods":      count(&corev1.PodList{}),
		"services":  count(&corev1.ServiceList{}),
		"pvcs":      count(&corev1.PersistentVolumeClaimList{}),
	}
	nps := &networkingv1.NetworkPolicyList{}
	if err := c.List(ctx, nps, client.InNamespace(namespace)); err == nil {
		for _, np := range nps.Items {
			if ref := metav1.GetControllerOf(&np); ref == nil || !templateLives(ctx, c, ref.Name, ref.UID) {
				out["networkpolicies"]++
			}
		}
	}
	return out
}

func templateLives(ctx context.Context, c client.Client, name string, uid types.UID) bool {
	t := &extv1beta1.SandboxTemplate{}
	return c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, t) == nil && t.UID == uid
}
