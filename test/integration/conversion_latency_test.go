package integration

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// unthrottled is a direct client without client-side rate limiting, so that a latency loop
// measures the API server (and the webhook), not client-go's token bucket.
func unthrottled(t testing.TB) client.Client {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1e6, 1e6
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConversionWebhookLatency measures what the conversion webhook adds to a GET: N GETs of one
// stored (v1beta1) Sandbox in v1beta1 (no conversion) and in v1alpha1 (one webhook call each),
// interleaved so both see the same load. It only runs with CONVERSION_LATENCY_N set:
//
//	CONVERSION_LATENCY_N=2000 KUBEBUILDER_ASSETS=$(hack/build-k8s.sh --print-dir) \
//	  go test -run TestConversionWebhookLatency -v ./test/integration/
func TestConversionWebhookLatency(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("CONVERSION_LATENCY_N"))
	if n <= 0 {
		t.Skip("set CONVERSION_LATENCY_N to measure")
	}
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "timed").Volume(homeVolume(), "/home/agent").Obj())
	c := unthrottled(t)
	key := client.ObjectKey{Namespace: ns, Name: "timed"}
	versions := []struct {
		name string
		obj  client.Object
	}{{"v1beta1", &agentsv1beta1.Sandbox{}}, {"v1alpha1", &agentsv1alpha1.Sandbox{}}}
	took := make([][]time.Duration, len(versions))
	for i := 0; i < n+n/10; i++ {
		for v, ver := range versions {
			start := time.Now()
			if err := c.Get(context.Background(), key, ver.obj); err != nil {
				t.Fatal(err)
			}
			if i >= n/10 { // the first tenth warms connections and caches up
				took[v] = append(took[v], time.Since(start))
			}
		}
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		a, b := percentile(took[0], q), percentile(took[1], q)
		t.Logf("p%-2.0f  v1beta1 (stored) %8s  v1alpha1 %8s  added by the webhook %8s", q*100, a, b, b-a)
	}
}

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkGetSandbox: go test -run '^$' -bench GetSandbox ./test/integration/ (with
// KUBEBUILDER_ASSETS) compares a GET in the storage version with one through the webhook.
func BenchmarkGetSandbox(b *testing.B) {
	ns := "default"
	name := "bench-get-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sb := testwrap.MakeSandbox(ns, name).Obj()
	if err := k8s.Create(context.Background(), sb); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = k8s.Delete(context.Background(), sb) })
	c := unthrottled(b)
	for _, ver := range []struct {
		name string
		obj  client.Object
	}{{"v1alpha1", &agentsv1alpha1.Sandbox{}}, {"v1beta1", &agentsv1beta1.Sandbox{}}} {
		b.Run(ver.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(sb), ver.obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
