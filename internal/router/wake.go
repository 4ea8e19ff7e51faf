package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// Wake on request: a request for a paused Sandbox that wakes on request (the
// agents.x-k8s.io/wake-on-request annotation, or an idle timeout) resumes it and waits until it
// is ready, up to a bound. The caller is authorized before (the guard runs first), so a denied
// request never wakes anything. Many requests, one resume: within a router, the first request
// resumes and the others wait for it; across routers, the resume is a patch of the scale
// subresource conditioned on the resourceVersion of the paused Sandbox, so only one of them
// takes effect.

// DefaultWakeTimeout is how long a request waits for a woken Sandbox unless
// X-Sandbox-Wake-Timeout or --wake-timeout say otherwise.
const DefaultWakeTimeout = 60 * time.Second

// maxWakeTimeout caps X-Sandbox-Wake-Timeout.
const maxWakeTimeout = 10 * time.Minute

// Waker resumes a paused Sandbox.
type Waker interface {
	// Resume sets replicas 1 on the Sandbox as of resourceVersion; resumed is false when it
	// changed since (someone else resumed it first).
	Resume(ctx context.Context, namespace, name, resourceVersion string) (resumed bool, err error)
}

// reasonWaking is the reason of the 503 a request gets when the Sandbox it woke is not ready
// within its bound.
const reasonWaking = "WakingUp"

// waitsForWake: the Ready reasons of a Sandbox that is paused or on its way up, which a request
// for a Sandbox that wakes on request waits through; anything else is answered at once.
func waitsForWake(reason string) bool {
	switch reason {
	case agentsv1beta1.ReasonPaused, agentsv1beta1.ReasonIdlePaused, agentsv1beta1.ReasonPodPending, agentsv1beta1.ReasonPodCreating,
		agentsv1beta1.ReasonPodNotReady, agentsv1beta1.ReasonPodNoIP, reasonNoReadyCondition:
		return true
	}
	return false
}

// wakeAndWait resumes the Sandbox if it is paused and waits until it is routable, the bound
// passes (a 503 with Retry-After) or the caller goes away.
func (p *Proxy) wakeAndWait(ctx context.Context, route Route, bound time.Duration) (Target, error) {
	n, ok := p.resolver.(changeNotifier)
	start := time.Now()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	asked, askedRV := false, "" // whether, and as of which resourceVersion, this request asked to resume
	for {
		var changed <-chan struct{}
		if ok {
			changed = n.Changed(route.Namespace, route.Name)
		}
		t, err := p.resolver.Resolve(route.Namespace, route.Name)
		var re *ResolveError
		if err == nil || !errors.As(err, &re) || !errors.Is(re.Kind, ErrNotReady) || !t.Wakes || !waitsForWake(re.Reason) {
			if err == nil && asked {
				p.metrics.wakeLatency(time.Since(start))
			}
			return t, err
		}
		if t.Paused && (!asked || t.ResourceVersion != askedRV) {
			// Paused, in a state this request has not asked about yet (a resume that found the
			// Sandbox changed gave way; the cache shows its new state).
			asked, askedRV = true, t.ResourceVersion
			p.resume(route.Namespace, route.Name, t.ResourceVersion)
		}
		var poll <-chan time.Time
		if changed == nil { // a resolver without notifications: look again shortly
			poll = time.After(50 * time.Millisecond)
		}
		select {
		case <-changed:
		case <-poll:
		case <-timer.C:
			return t, &ResolveError{Kind: ErrNotReady, Namespace: route.Namespace, Name: route.Name,
				Reason: fmt.Sprintf("%s: resumed on request and not ready after %s; retry", reasonWaking, bound)}
		case <-ctx.Done():
			return t, err
		}
	}
}

// resume asks the Waker once per Sandbox at a time; the requests behind it wait on the cache.
func (p *Proxy) resume(namespace, name, resourceVersion string) {
	if p.waker == nil {
		return
	}
	key := cacheKey{namespace, name}
	if _, busy := p.resuming.LoadOrStore(key, struct{}{}); busy {
		return
	}
	go func() {
		defer p.resuming.Delete(key)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resumed, err := p.waker.Resume(ctx, namespace, name, resourceVersion)
		switch {
		case err != nil:
			p.metrics.wake("failed")
			p.log.Error("resuming a paused sandbox on request", "namespace", namespace, "sandbox", name, "err", err)
		case resumed:
			p.metrics.wake("resumed")
			p.log.Info("resumed a paused sandbox on request", "namespace", namespace, "sandbox", name)
		default:
			p.metrics.wake("already")
		}
	}()
}

// ScaleWaker resumes through the scale subresource, the one right the router holds on
// Sandboxes beyond reading them (patch sandboxes/scale).
type ScaleWaker struct {
	Client dynamic.Interface
}

// sandboxesGVR is v1alpha1's: only v1alpha1 Sandboxes have a scale subresource (v1beta1 has
// operatingMode, no replicas), and the router's role grants patch on sandboxes/scale alone. A
// wake is rare, so its one conversion webhook call costs nothing on the request path that
// matters.
var sandboxesGVR = agentsv1alpha1.GroupVersion.WithResource("sandboxes")

// Resume implements Waker: a merge patch of the scale subresource (whose resourceVersion is the
// Sandbox's) that the API server applies only while the Sandbox is as the router saw it paused.
// A JSON patch testing /spec/replicas cannot do it: a Scale of 0 replicas omits the field.
func (w *ScaleWaker) Resume(ctx context.Context, namespace, name, resourceVersion string) (bool, error) {
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"spec":{"replicas":1}}`, resourceVersion)
	_, err := w.Client.Resource(sandboxesGVR).Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "sandbox-router"}, "scale")
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		// Changed since the router saw it paused (resumed by someone else), or gone.
		return false, nil
	}
	return false, err
}

// Activity touches: a request to a port of the pod other than sandboxd's is activity sandboxd
// does not see. The router tells it (POST /v1/activity), at most once per touchEvery per
// Sandbox, off the request's path.
const touchEvery = 5 * time.Second

func (p *Proxy) touch(t Target, route Route) {
	if !t.IdleWatched || p.touchClient == nil {
		return
	}
	key := cacheKey{route.Namespace, route.Name}
	now := time.Now()
	if last, ok := p.touched.Load(key); ok && now.Sub(last.(time.Time)) < touchEvery {
		return
	}
	p.touched.Store(key, now)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = p.sendTouch(ctx, netip.AddrPortFrom(t.Addr, p.touchPort))
	}()
}

// sendTouch posts one activity note to sandboxd at addr and returns its status. A redirect is
// the answer, never followed (touchClient).
func (p *Proxy) sendTouch(ctx context.Context, addr netip.AddrPort) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr.String()+"/v1/activity", nil)
	if err != nil {
		return 0, err
	}
	resp, err := p.touchClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
