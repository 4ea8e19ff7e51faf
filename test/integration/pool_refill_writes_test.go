package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// A warm pool member is the price of every warm claim, paid again at each refill: its writes
// are held to a budget as the hot path's are. Four: the Sandbox, its Service and Pod, and one
// status write. Its template's NetworkPolicy, in force before the pool makes members, covers
// their pods (no policy of their own: docs/egress.md).
func TestAWarmMemberCostsFourControllerWrites(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mark := controllerWrites.mark()
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj())
	testwrap.Eventually(t, "the template's policy", exists(policyOf(ns, "tpl"), true))
	mustCreateObj(t, testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(3).Obj())
	testwrap.Eventually(t, "pool of 3 ready", poolReady(t, ns, "pool", 3))

	perKind := map[string]int{}
	statusWrites := map[string]int{} // member -> status writes
	for _, w := range controllerWrites.since(mark, ns) {
		switch {
		case w.method == http.MethodPost && strings.HasSuffix(w.path, "/sandboxes"):
			perKind["Sandbox create"]++
		case w.method == http.MethodPost && strings.HasSuffix(w.path, "/pods"):
			perKind["Pod create"]++
		case w.method == http.MethodPost && strings.HasSuffix(w.path, "/services"):
			perKind["Service create"]++
		case w.method == http.MethodPost && strings.HasSuffix(w.path, "/networkpolicies"):
			perKind["NetworkPolicy create"]++
		case strings.Contains(w.path, "/sandboxes/") && strings.HasSuffix(w.path, "/status"):
			parts := strings.Split(w.path, "/")
			statusWrites[parts[len(parts)-2]]++
		case strings.Contains(w.path, "/sandboxes/") || strings.Contains(w.path, "/pods/") || strings.Contains(w.path, "/services/"):
			perKind["other member write "+w.method]++
		}
	}
	for _, kind := range []string{"Sandbox create", "Pod create", "Service create"} {
		if perKind[kind] != 3 {
			t.Errorf("%s: %d writes for 3 members, want 3 (all member writes: %v)", kind, perKind[kind], perKind)
		}
		delete(perKind, kind)
	}
	// The template's own, none for the members.
	if perKind["NetworkPolicy create"] != 1 {
		t.Errorf("NetworkPolicy create: %d writes for 3 members and their template, want 1, the template's (all member writes: %v)", perKind["NetworkPolicy create"], perKind)
	}
	delete(perKind, "NetworkPolicy create")
	if len(perKind) > 0 {
		t.Errorf("members cost writes beyond their objects and one status each: %v", perKind)
	}
	if len(statusWrites) != 3 {
		t.Errorf("status writes went to %d members (%v), want each of the 3", len(statusWrites), statusWrites)
	}
	for member, n := range statusWrites {
		if n != 1 {
			t.Errorf("member %s had its status written %d times, want once (when Ready): nobody reads a starting member's status", member, n)
		}
	}
}
