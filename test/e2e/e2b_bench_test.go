//go:build e2e

package e2e

import (
	"slices"
	"testing"
	"time"

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
// E2B's timing is taken inside Node, so Node's own start is not counted.
func BenchmarkE2BCreateToFirstCommandBesideOurSDK(b *testing.B) {
	if cluster.E2BURL == "" {
		b.Skip("the router runs on the host: no E2B port")
	}
	sdkDir := e2bsdk.Install(b)
	ns := newNamespace(b, "e2b-bench")
	tmpl := applyTemplate(b, templateFor(ns, "agent", false))
	pool := createPool(b, ns, "agent", tmpl.Name, 1)
	key := e2bKey(b, ns, "bench", true)
	cli := sdkClient(b, ns)
	var viaE2B, viaSDK []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		waitPoolReady(b, pool)
		res := e2bsdk.Run(b, sdkDir, "testdata/e2b/create_once.cjs", 2*time.Minute, 1,
			"E2B_API_URL="+cluster.E2BURL, "E2B_SANDBOX_URL="+cluster.E2BURL, "E2B_API_KEY="+key, "TEMPLATE="+tmpl.Name)
		viaE2B = append(viaE2B, time.Duration(res.Timings["create to first command"]*float64(time.Millisecond)))

		waitPoolReady(b, pool)
		start := time.Now()
		sb, err := cli.Create(b.Context(), tmpl.Name)
		if err != nil {
			b.Fatal(err)
		}
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
