//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap/e2bsdk"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// BenchmarkE2BCreateToFirstCommandBesideOurSDK times create -> first command output from a warm
// pool through E2B's SDK (the router's E2B port) and through our Go SDK (a claim, then a command
// through the router), alternated round by round on the same pool, each side waiting for a
// refilled pool first. It reports each side's p50 and p99 and their ratio:
//
//	go test -tags e2e -run '^$' -bench E2BCreateToFirstCommand -benchtime 10x ./test/e2e/
//
// E2B's timing is taken inside a Node process warmed up by one untimed round, as the Go SDK's
// client is warm from the rounds before (testdata/e2b/create_once.cjs).
func BenchmarkE2BCreateToFirstCommandBesideOurSDK(b *testing.B) {
	if cluster.E2BURL == "" {
		b.Skip("the router runs on the host: no E2B port")
	}
	sdkDir := e2bsdk.Install(b)
	ns := newNamespace(b, "e2b-bench")
	tmpl := applyTemplate(b, templateFor(ns, "agent", false))
	// Two members: E2B's round takes one to warm its Node process up, then the timed one.
	pool := createPool(b, ns, "agent", tmpl.Name, 2)
	key := e2bKey(b, ns, "bench", true)
	cli := sdkClient(b, ns)
	var viaE2B, viaSDK, sdkCreate, e2bCreate []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		waitWarmMembers(b, pool, 2)
		res := e2bsdk.Run(b, sdkDir, "testdata/e2b/create_once.cjs", 2*time.Minute, 1,
			"E2B_API_URL="+cluster.E2BURL, "E2B_SANDBOX_URL="+cluster.E2BURL, "E2B_API_KEY="+key, "TEMPLATE="+tmpl.Name)
		viaE2B = append(viaE2B, time.Duration(res.Timings["create to first command"]*float64(time.Millisecond)))
		e2bCreate = append(e2bCreate, time.Duration(res.Timings["create"]*float64(time.Millisecond)))

		waitWarmMembers(b, pool, 2)
		start := time.Now()
		sb, err := cli.Create(b.Context(), tmpl.Name)
		if err != nil {
			b.Fatal(err)
		}
		sdkCreate = append(sdkCreate, time.Since(start))
		if r, err := sb.Run(b.Context(), sdk.Shell("echo hello")); err != nil || r.Stdout != "hello\n" {
			b.Fatalf("first command: %v %+v", err, r)
		}
		viaSDK = append(viaSDK, time.Since(start))
		if err := cli.Delete(b.Context(), sb.Name()); err != nil {
			b.Fatal(err)
		}
	}
	report(b, "e2b", viaE2B)
	report(b, "sdk", viaSDK)
	b.Logf("create alone: e2b %v, sdk %v", e2bCreate, sdkCreate)
	b.ReportMetric(float64(percentile(viaE2B, 50))/float64(percentile(viaSDK, 50)), "e2b/sdk-p50")
}

func report(b *testing.B, name string, ds []time.Duration) {
	b.ReportMetric(float64(percentile(ds, 50))/1e6, name+"-p50-ms")
	b.ReportMetric(float64(percentile(ds, 99))/1e6, name+"-p99-ms")
	b.Logf("%s: %v", name, ds)
}

// percentile is the nearest-rank percentile of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(i-1, 0)]
}

// waitWarmMembers waits until the pool has n Ready members no claim has taken: the pool's status
// can still count a member the last round took, which would send the next claim cold.
func waitWarmMembers(b *testing.B, pool *extv1alpha1.SandboxWarmPool, n int) {
	slow.EventuallyContext(b, "ready, unclaimed members of "+pool.Name, func(ctx context.Context) error {
		list := &agentsv1alpha1.SandboxList{}
		if err := kube.List(ctx, list, client.InNamespace(pool.Namespace)); err != nil {
			return err
		}
		ready := 0
		for i := range list.Items {
			owner := metav1.GetControllerOf(&list.Items[i])
			if owner != nil && owner.Kind == "SandboxWarmPool" && owner.Name == pool.Name && sandboxReady(&list.Items[i]) {
				ready++
			}
		}
		if ready < n {
			return fmt.Errorf("%d of %d", ready, n)
		}
		return nil
	})
}
