package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
)

// claimTimes is what the client saw of one claim.
type claimTimes struct {
	sent, podIPs, ready time.Time
	sandbox             string
	err                 error
	seen                bool // the watch showed it (it exists even if its create call failed)
}

// recorder notes, from watch events, when each claim first showed pod IPs and Ready.
type recorder struct {
	mu     sync.Mutex
	claims map[string]*claimTimes
	done   chan struct{} // closed when every expected claim has pod IPs
	want   int
	got    int
}

func newRecorder() *recorder {
	return &recorder{claims: map[string]*claimTimes{}, done: make(chan struct{})}
}

func (r *recorder) sent(name string, at time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.entry(name)
	c.sent, c.err = at, err
}

func (r *recorder) entry(name string) *claimTimes {
	c, ok := r.claims[name]
	if !ok {
		c = &claimTimes{}
		r.claims[name] = c
	}
	return c
}

func (r *recorder) observe(o any) {
	claim, ok := o.(*extv1beta1.SandboxClaim)
	if !ok {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.entry(claim.Name)
	c.seen = true
	if c.podIPs.IsZero() && len(claim.Status.SandboxStatus.PodIPs) > 0 {
		c.podIPs = now
		c.sandbox = claim.Status.SandboxStatus.Name
		r.got++
		if r.want > 0 && r.got == r.want {
			close(r.done)
		}
	}
	if c.ready.IsZero() && meta.IsStatusConditionTrue(claim.Status.Conditions, extv1beta1.ClaimConditionReady) {
		c.ready = now
	}
}

// expect sets how many claims make the run complete.
func (r *recorder) expect(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want = n
	if r.got >= n {
		close(r.done)
	}
}

// watchClaims starts an informer on the namespace's claims feeding the recorder.
func watchClaims(ctx context.Context, c cache.Cache, rec *recorder) error {
	inf, err := c.GetInformer(ctx, &extv1beta1.SandboxClaim{})
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    rec.observe,
		UpdateFunc: func(_, n any) { rec.observe(n) },
	})
	return err
}

// fire sends n claims (each with env) at rate per second, open loop: each create runs on its own goroutine so a
// slow API server cannot slow the arrivals. It returns when every create has returned.
func fire(ctx context.Context, c client.Client, ns, template string, n int, rate float64, prefix string, env []extv1beta1.EnvVar, rec *recorder) time.Duration {
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		next := start.Add(time.Duration(i) * interval)
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return time.Since(start)
			case <-time.After(d):
			}
		}
		name := fmt.Sprintf("%s-%05d", prefix, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			claim := &extv1beta1.SandboxClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				// Any pool of the template, as a v1alpha1 claim naming only the template: the
				// benchmark's CRDs have no conversion webhook, so it speaks the stored version.
				Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: extv1beta1.ShadowPoolPrefix + template}, Env: env},
			}
			sentAt := time.Now()
			rec.sent(name, sentAt, c.Create(ctx, claim))
		}()
	}
	elapsed := time.Since(start)
	wg.Wait()
	return elapsed
}
