//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// Domain allow-lists on the local cluster (docs/egress.md, "Domains"): Cilium's DNS proxy reads
// the sandbox's lookups and opens the addresses of the listed names only. The names live in the
// reserved zone test., answered by a lab DNS server this test runs (CoreDNS forwards the zone to
// spec.TestDNSServer), and point at servers in a network namespace of the test's, outside the
// pod network: toFQDNs never matches a pod's address, and the internet is not reachable here.

const domainsLabGW = "203.0.113.1"

// The lab's hosts, in the documentation range RFC 5737 calls TEST-NET-3.
const (
	allowedHost = "203.0.113.10" // allowed.<zone>
	subHost     = "203.0.113.11" // sub.allowed.<zone>
	otherHost   = "203.0.113.12" // other.<zone>
	movedHost   = "203.0.113.13" // allowed.<zone>, once it moves
)

// probeScript looks each host:port up and connects to it (3 s), printing one JSON object:
// host:port → {ip, connected, lookupMs} or {error}.
const probeScript = `
import json, socket, sys, time
out = {}
for target in sys.argv[1:]:
    host, _, port = target.rpartition(":")
    t0 = time.monotonic()
    try:
        ip = socket.gethostbyname(host)
    except OSError as e:
        out[target] = {"error": "lookup: %s" % e}
        continue
    t1 = time.monotonic()
    try:
        socket.create_connection((ip, int(port)), timeout=3).close()
        ok = True
    except OSError:
        ok = False
    out[target] = {"ip": ip, "connected": ok, "lookupMs": (t1 - t0) * 1000}
print(json.dumps(out))
`

type probeResult struct {
	IP        string  `json:"ip"`
	Connected bool    `json:"connected"`
	LookupMs  float64 `json:"lookupMs"`
	Error     string  `json:"error"`
}

// probe runs probeScript in the sandbox's runtime container.
func probe(t *testing.T, ns, pod string, targets ...string) map[string]probeResult {
	t.Helper()
	out, errOut := execOut(t, ns, pod, "python3 -c '"+probeScript+"' "+strings.Join(targets, " "))
	res := map[string]probeResult{}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("probe in %s: %v: %q (stderr %q)", pod, err, out, errOut)
	}
	return res
}

// expectProbe checks one target's outcome: connected to wantIP, or not connected.
func expectProbe(t *testing.T, res map[string]probeResult, target, why string, wantConnected bool, wantIP string) {
	t.Helper()
	got, ok := res[target]
	switch {
	case !ok:
		t.Errorf("%s (%s): not probed", target, why)
	case got.Error != "":
		t.Errorf("%s (%s): %s, want a lookup that answers", target, why, got.Error)
	case wantIP != "" && got.IP != wantIP:
		t.Errorf("%s (%s): resolved to %s, want %s", target, why, got.IP, wantIP)
	case got.Connected != wantConnected:
		t.Errorf("%s (%s): connected = %v, want %v", target, why, got.Connected, wantConnected)
	}
}

func TestEgressDomainsOnTheLocalCluster(t *testing.T) {
	labNS := testHostAt(t, "domains", domainsLabGW, []string{allowedHost, subHost, otherHost, movedHost, spec.TestDNSServer})
	ns := newNamespace(t, "domains")
	ctx := t.Context()
	// The names live under a zone of this run's own: Cilium shares what it learned for a name
	// among every policy that lists it, and an earlier run's policy (a namespace still being
	// deleted) would have taught it the moved address already.
	zone := ns + ".test"
	allowed, sub, other := "allowed."+zone, "sub.allowed."+zone, "other."+zone
	dns := serveLabDNS(t, labNS, netip.MustParseAddr(spec.TestDNSServer), map[string]string{
		allowed: allowedHost, sub: subHost, other: otherHost,
	})
	port := func(name string) string { return name + ":80" }

	// The namespace admin writes the list on the template; the tenant claims from it, with an
	// annotation of its own that tries to add the other name.
	applyTemplate(t, templateFor(ns, "listed", false).Annotation(agentsv1alpha1.EgressDomainsAnnotation, allowed+", *.allowed."+zone))
	tenantCl := tenant(t, ns)
	claimed := time.Now()
	mustf(t, tenantCl.Create(ctx, testwrap.MakeClaim(ns, "agent").Template("listed").WarmPool("none").
		Annotation(agentsv1alpha1.EgressDomainsAnnotation, allowed+", "+other).Obj()), "tenant: creating the claim")
	waitPodReady(t, ns, "agent")
	first := waitFirstConnection(t, ns, "agent", port(allowed))

	// Beside it, the same claim of a template without a list, to the same server by address
	// (its secure-default policy allows public addresses): what the list adds to a sandbox's start.
	applyTemplate(t, templateFor(ns, "unlisted", false))
	baselineClaimed := time.Now()
	mustf(t, tenantCl.Create(ctx, testwrap.MakeClaim(ns, "baseline").Template("unlisted").WarmPool("none").Obj()), "tenant: creating the baseline claim")
	waitPodReady(t, ns, "baseline")
	baseline := waitFirstConnection(t, ns, "baseline", port(allowedHost))
	t.Logf("claim created → first connection: with a domain list, to %s, %v; without, by address, %v", allowed,
		first.Sub(claimed).Round(time.Millisecond), baseline.Sub(baselineClaimed).Round(time.Millisecond))

	res := probe(t, ns, "agent", port(movedHost), port(allowed), port(sub), port(other), port(otherHost))
	expectProbe(t, res, port(movedHost), "an address no listed name has resolved to", false, movedHost)
	expectProbe(t, res, port(allowed), "listed by name", true, allowedHost)
	expectProbe(t, res, port(sub), "under the listed *.", true, subHost)
	expectProbe(t, res, port(other), "not listed; the claim's own annotation adds nothing", false, otherHost)
	expectProbe(t, res, port(otherHost), "not listed, by address", false, otherHost)

	// The name moves: the next lookup opens its new address.
	dns.Set(allowed, movedHost)
	res = probe(t, ns, "agent", port(allowed))
	expectProbe(t, res, port(allowed), "moved after the policy was written", true, movedHost)

	t.Run("a tenant cannot list domains on a raw Sandbox", func(t *testing.T) {
		sb := runtimeSandbox(ns, "raw-listed")
		sb.Annotations = map[string]string{agentsv1alpha1.EgressAnnotation: "restricted", agentsv1alpha1.EgressDomainsAnnotation: other}
		refusedWith(t, "tenant: a raw Sandbox listing a name", tenantCl.Create(ctx, sb), "sandboxes/network")
	})
	reportLookupCost(t, ns, port(sub))
}

// waitFirstConnection probes target until it connects and returns when it did.
func waitFirstConnection(t *testing.T, ns, pod, target string) time.Time {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		res := probe(t, ns, pod, target)
		if res[target].Connected {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never connected from %s within a minute: %+v", target, pod, res[target])
		}
	}
}

// reportLookupCost logs the median lookup time of a listed name through Cilium's DNS proxy
// beside the same lookup from a sandbox whose lookups go to CoreDNS directly.
func reportLookupCost(t *testing.T, ns, target string) {
	mustf(t, kube.Create(t.Context(), runtimeSandbox(ns, "unlisted")), "creating a sandbox without a list")
	waitPodReady(t, ns, "unlisted")
	const rounds = 15
	var proxied, direct []float64
	for range rounds {
		proxied = append(proxied, probe(t, ns, "agent", target)[target].LookupMs)
		direct = append(direct, probe(t, ns, "unlisted", target)[target].LookupMs)
	}
	t.Logf("lookup of %s, median of %d alternated: through Cilium's DNS proxy %s, without %s",
		target, rounds, medianMs(proxied), medianMs(direct))
}

func medianMs(v []float64) string {
	slices.Sort(v)
	return fmt.Sprintf("%.1f ms", v[len(v)/2])
}
