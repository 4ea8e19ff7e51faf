package sandboxclaim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

var sandboxGR = schema.GroupResource{Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes"}

// assertServedBy checks that the claim's status names sb, that sb is the claim's (controller
// reference, claim UID label, launch type) and no longer a pool member.
func assertServedBy(t *testing.T, g *rig, claimName, sbName, launch string) {
	t.Helper()
	claim := g.claim(claimName)
	if got := claim.Status.SandboxStatus.Name; got != sbName {
		t.Fatalf("claim %s status names Sandbox %q, want %q", claimName, got, sbName)
	}
	sb := g.sandbox(sbName)
	if sb == nil {
		t.Fatalf("Sandbox %s does not exist", sbName)
	}
	if !ownedBy(sb, claim) {
		t.Errorf("Sandbox %s is controlled by %v, want claim %s", sbName, metav1.GetControllerOf(sb), claimName)
	}
	if got := sb.Labels[extv1beta1.ClaimUIDLabel]; got != string(claim.UID) {
		t.Errorf("Sandbox %s claim-uid label %q, want %q", sbName, got, claim.UID)
	}
	if got := sb.Labels[extv1beta1.LaunchTypeLabel]; got != launch {
		t.Errorf("Sandbox %s launch type %q, want %q", sbName, got, launch)
	}
	if v, ok := sb.Labels[extv1beta1.WarmPoolLabel]; ok {
		t.Errorf("Sandbox %s still carries the warm pool label (%q): its pool would count it", sbName, v)
	}
}

// assertPoolStillOwns checks that members the claim did not take are untouched pool members.
func assertPoolStillOwns(t *testing.T, g *rig, names ...string) {
	t.Helper()
	for _, name := range names {
		sb := g.sandbox(name)
		if ref := metav1.GetControllerOf(sb); ref == nil || ref.Kind != "SandboxWarmPool" || sb.Labels[extv1beta1.WarmPoolLabel] == "" {
			t.Errorf("member %s is controlled by %v with labels %v, want it left to its pool", name, ref, sb.Labels)
		}
	}
}

func TestReconcileServesAClaimWarmOrCold(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := warmPool("pool")
	m1 := warmMember(pool, tmpl, "m1", "10.0.0.1")
	const (
		coldNone    = "Normal SandboxProvisioned Created Sandbox \"c\" from template \"python\" (cold: the claim's warmpool is none)"
		coldNoReady = "Normal SandboxProvisioned Created Sandbox \"c\" from template \"python\" (cold: no warm sandbox of the template was ready)"
	)
	cases := []struct {
		name    string
		claim   *extv1beta1.SandboxClaim
		members []*agentsv1beta1.Sandbox // in the API server
		queued  []*agentsv1beta1.Sandbox // as the watch last showed them
		extra   []client.Object

		wantSandbox string
		wantLaunch  string
		wantReady   metav1.ConditionStatus
		wantWrites  []string
		wantEvents  []string
	}{
		{name: "a ready member is adopted: one patch of the member, one status write, no event",
			claim: claimOf("c").Hub(), members: []*agentsv1beta1.Sandbox{m1.Hub()}, queued: []*agentsv1beta1.Sandbox{m1.Hub()},
			wantSandbox: "m1", wantLaunch: extv1beta1.LaunchTypeWarm, wantReady: metav1.ConditionTrue,
			wantWrites: []string{"patch Sandbox/m1", "status SandboxClaim/c"}},
		{name: "warmpool none starts cold though a member is ready",
			claim: claimOf("c").WarmPool("none").Hub(), members: []*agentsv1beta1.Sandbox{m1.Hub()}, queued: []*agentsv1beta1.Sandbox{m1.Hub()},
			wantSandbox: "c", wantLaunch: extv1beta1.LaunchTypeCold, wantReady: metav1.ConditionFalse,
			wantWrites: []string{"create Sandbox/c", "status SandboxClaim/c"}, wantEvents: []string{coldNone}},
		{name: "a claim that forks a Sandbox starts cold though a member is ready",
			claim: claimOf("c").Annotation(agentsv1beta1.ForkOfAnnotation, "parent").Hub(), members: []*agentsv1beta1.Sandbox{m1.Hub()}, queued: []*agentsv1beta1.Sandbox{m1.Hub()},
			wantSandbox: "c", wantLaunch: extv1beta1.LaunchTypeCold, wantReady: metav1.ConditionFalse,
			wantWrites: []string{"create Sandbox/c", "status SandboxClaim/c"},
			wantEvents: []string{"Normal SandboxProvisioned Created Sandbox \"c\" from template \"python\" (cold: the claim forks Sandbox parent)"}},
		{name: "no member queued: cold",
			claim: claimOf("c").Hub(), members: []*agentsv1beta1.Sandbox{m1.Hub()},
			wantSandbox: "c", wantLaunch: extv1beta1.LaunchTypeCold, wantReady: metav1.ConditionFalse,
			wantWrites: []string{"create Sandbox/c", "status SandboxClaim/c"}, wantEvents: []string{coldNoReady}},
		{name: "a queued member that stopped being ready is passed over",
			claim:       claimOf("c").Hub(),
			members:     []*agentsv1beta1.Sandbox{m1.Clone().Condition(metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonPodNotReady}).Hub()},
			queued:      []*agentsv1beta1.Sandbox{m1.Hub()},
			wantSandbox: "c", wantLaunch: extv1beta1.LaunchTypeCold, wantReady: metav1.ConditionFalse,
			wantWrites: []string{"create Sandbox/c", "status SandboxClaim/c"}, wantEvents: []string{coldNoReady}},
		{name: "a member whose spec was changed since its pool made it is passed over",
			claim:       claimOf("c").Hub(),
			members:     []*agentsv1beta1.Sandbox{m1.Clone().Generation(2).Hub()},
			queued:      []*agentsv1beta1.Sandbox{m1.Clone().Generation(2).Hub()},
			wantSandbox: "c", wantLaunch: extv1beta1.LaunchTypeCold, wantReady: metav1.ConditionFalse,
			wantWrites: []string{"create Sandbox/c", "status SandboxClaim/c"}, wantEvents: []string{coldNoReady}},
		{name: "only members of the pool the claim names",
			claim:       claimOf("c").WarmPool("pool").Hub(),
			members:     []*agentsv1beta1.Sandbox{warmMember(warmPool("other"), tmpl, "o1", "10.0.0.9").Hub(), m1.Hub()},
			queued:      []*agentsv1beta1.Sandbox{warmMember(warmPool("other"), tmpl, "o1", "10.0.0.9").Hub(), m1.Hub()},
			wantSandbox: "m1", wantLaunch: extv1beta1.LaunchTypeWarm, wantReady: metav1.ConditionTrue,
			wantWrites: []string{"patch Sandbox/m1", "status SandboxClaim/c"}},
		{name: "a pool the claim names that does not exist: cold, and the claim's owner is warned",
			claim: claimOf("c").WarmPool("typo").Hub(), members: []*agentsv1beta1.Sandbox{m1.Hub()}, queued: []*agentsv1beta1.Sandbox{m1.Hub()},
			wantSandbox: "c", wantLaunch: extv1beta1.LaunchTypeCold, wantReady: metav1.ConditionFalse,
			wantWrites: []string{"create Sandbox/c", "status SandboxClaim/c"},
			wantEvents: []string{"Warning WarmPoolNotFound SandboxWarmPool \"typo\" not found; starting a Sandbox from the template instead", coldNoReady}},
		{name: "a member of an older template revision in a Recreate pool is passed over",
			claim:       claimOf("c").Hub(),
			members:     []*agentsv1beta1.Sandbox{m1.Clone().Label(extv1beta1.TemplateHashLabel, "older").Hub()},
			queued:      []*agentsv1beta1.Sandbox{m1.Clone().Label(extv1beta1.TemplateHashLabel, "older").Hub()},
			extra:       []client.Object{testwrap.MakeWarmPool(ns, "pool").UID("pool-uid").Template("python").UpdateStrategy(extv1alpha1.RecreateSandboxWarmPoolUpdateStrategyType).Hub()},
			wantSandbox: "c", wantLaunch: extv1beta1.LaunchTypeCold, wantReady: metav1.ConditionFalse,
			wantWrites: []string{"create Sandbox/c", "status SandboxClaim/c"}, wantEvents: []string{coldNoReady}},
		{name: "a member of an older template revision in an OnReplenish pool is still served",
			claim:       claimOf("c").Hub(),
			members:     []*agentsv1beta1.Sandbox{m1.Clone().Label(extv1beta1.TemplateHashLabel, "older").Hub()},
			queued:      []*agentsv1beta1.Sandbox{m1.Clone().Label(extv1beta1.TemplateHashLabel, "older").Hub()},
			extra:       []client.Object{pool},
			wantSandbox: "m1", wantLaunch: extv1beta1.LaunchTypeWarm, wantReady: metav1.ConditionTrue,
			wantWrites: []string{"patch Sandbox/m1", "status SandboxClaim/c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]client.Object{tmpl, tc.claim}, tc.extra...)
			if !slices.ContainsFunc(tc.extra, func(o client.Object) bool { _, ok := o.(*extv1beta1.SandboxWarmPool); return ok }) {
				objs = append(objs, pool)
			}
			var memberNames []string
			for _, m := range tc.members {
				objs = append(objs, m)
				memberNames = append(memberNames, m.Name)
			}
			g := newRig(t, objs...)
			g.offer(g.r, tc.queued...)
			if res := g.mustReconcile("c"); res.RequeueAfter != 0 {
				t.Errorf("requeue after %v, want none (the Sandbox's events bring the claim back)", res.RequeueAfter)
			}
			assertServedBy(t, g, "c", tc.wantSandbox, tc.wantLaunch)
			assertPoolStillOwns(t, g, slices.DeleteFunc(memberNames, func(n string) bool { return n == tc.wantSandbox })...)
			if got := meta.FindStatusCondition(g.claim("c").Status.Conditions, extv1beta1.ClaimConditionReady); got == nil || got.Status != tc.wantReady {
				t.Errorf("claim Ready condition %+v, want status %s", got, tc.wantReady)
			}
			if d := cmp.Diff(tc.wantWrites, g.takeWrites()); d != "" {
				t.Errorf("API writes (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantEvents, g.emitted()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

// Two controller processes (an old and a new leader, each with its own warm queue) both see
// member m1 unclaimed and hand it to different claims: the optimistic lock lets one win, and
// the loser takes the next member or starts cold. A member is never given to two claims.
func TestTwoReplicasRacingForOneMember(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := warmPool("pool")
	m1, m2 := warmMember(pool, tmpl, "m1", "10.0.0.1").Hub(), warmMember(pool, tmpl, "m2", "10.0.0.2").Hub()
	cases := []struct {
		name        string
		members     []*agentsv1beta1.Sandbox
		wantLoser   string
		wantLaunch  string
		wantLoserWr []string
	}{
		{"the loser takes the next member", []*agentsv1beta1.Sandbox{m1, m2}, "m2", extv1beta1.LaunchTypeWarm,
			[]string{"patch Sandbox/m1", "patch Sandbox/m2", "status SandboxClaim/b"}},
		{"the loser starts cold when no member is left", []*agentsv1beta1.Sandbox{m1}, "b", extv1beta1.LaunchTypeCold,
			[]string{"patch Sandbox/m1", "create Sandbox/b", "status SandboxClaim/b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{tmpl, pool, claimOf("a").Hub(), claimOf("b").Hub()}
			for _, m := range tc.members {
				objs = append(objs, m)
			}
			g := newRig(t, objs...)
			other := g.replica()
			g.offer(g.r, tc.members...)
			g.offer(other, tc.members...)
			g.freezeCache() // neither replica's cache shows the other's adoption

			g.mustReconcile("a")
			g.takeWrites()
			if _, err := g.reconcileWith(other, "b"); err != nil {
				t.Fatalf("the losing claim's reconcile: %v, want it served anyway", err)
			}
			assertServedBy(t, g, "a", "m1", extv1beta1.LaunchTypeWarm)
			assertServedBy(t, g, "b", tc.wantLoser, tc.wantLaunch)
			if d := cmp.Diff(tc.wantLoserWr, g.takeWrites()); d != "" {
				t.Errorf("the loser's API writes (-want +got): its patch of m1 conflicts once and is not retried on a member taken\n%s", d)
			}
		})
	}
}

// The cached copy of a member can be older than the API server's (a status write the watch has
// not delivered): the conflicting patch is retried once on the live object.
func TestAdoptionRetriesAStaleCopyOnTheLiveMember(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := warmPool("pool")
	m1 := warmMember(pool, tmpl, "m1", "10.0.0.1").Hub()
	g := newRig(t, tmpl, pool, m1, claimOf("c").Hub())
	g.offer(g.r, m1)
	g.freezeCache()
	live := g.sandbox("m1")
	live.Status.PodIPs = []string{"10.0.0.1", "fd00::1"}
	if err := g.api.Status().Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	g.mustReconcile("c")
	assertServedBy(t, g, "c", "m1", extv1beta1.LaunchTypeWarm)
	want := []string{"patch Sandbox/m1", "patch Sandbox/m1", "status SandboxClaim/c"}
	if d := cmp.Diff(want, g.takeWrites()); d != "" {
		t.Errorf("API writes (-want +got):\n%s", d)
	}
}

// However many members are queued, one reconcile tries at most maxAdoptAttempts of them before
// it starts cold: a claim is never held up by a pool it cannot take from.
func TestAdoptionGivesUpAfterMaxAttempts(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := warmPool("pool")
	objs := []client.Object{tmpl, pool, claimOf("c").Hub()}
	var members []*agentsv1beta1.Sandbox
	for _, name := range []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7"} {
		m := warmMember(pool, tmpl, name, "10.0.0.1").Hub()
		members = append(members, m)
		objs = append(objs, m)
	}
	g := newRig(t, objs...)
	g.offer(g.r, members...)
	g.failWrites("patch", "Sandbox", apierrors.NewConflict(sandboxGR, "member", errors.New("taken")))
	g.mustReconcile("c")
	assertServedBy(t, g, "c", "c", extv1beta1.LaunchTypeCold)
	tried := map[string]int{}
	for _, w := range g.takeWrites() {
		if name, ok := strings.CutPrefix(w, "patch Sandbox/"); ok {
			tried[name]++
		}
	}
	if len(tried) != maxAdoptAttempts {
		t.Errorf("members tried %v, want %d of them (each once cached, once live)", tried, maxAdoptAttempts)
	}
}

// An API error on the adopting patch fails the reconcile (it is retried) and says so on the
// claim; the member stays in the pool and in the warm queue, so the retry still serves it warm.
func TestAdoptionAPIErrorKeepsTheMemberForTheRetry(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := warmPool("pool")
	m1 := warmMember(pool, tmpl, "m1", "10.0.0.1").Hub()
	g := newRig(t, tmpl, pool, m1, claimOf("c").Hub())
	g.offer(g.r, m1)
	boom := apierrors.NewInternalError(errors.New("etcd timeout"))
	g.failWrites("patch", "Sandbox", boom)
	if _, err := g.reconcile("c"); !apierrors.IsInternalError(err) {
		t.Fatalf("Reconcile error %v, want the API server's error (the claim is retried)", err)
	}
	ready := meta.FindStatusCondition(g.claim("c").Status.Conditions, extv1beta1.ClaimConditionReady)
	if ready == nil || ready.Reason != agentsv1beta1.ReasonReconcilerError || !strings.Contains(ready.Message, "etcd timeout") {
		t.Errorf("claim Ready condition %+v, want reason %s naming the error", ready, agentsv1beta1.ReasonReconcilerError)
	}
	if d := cmp.Diff([]string{"m1"}, g.sandboxNames()); d != "" {
		t.Errorf("Sandboxes (-want +got), none created on an error:\n%s", d)
	}
	assertPoolStillOwns(t, g, "m1")

	g.failWrites("patch", "Sandbox", nil)
	g.mustReconcile("c")
	assertServedBy(t, g, "c", "m1", extv1beta1.LaunchTypeWarm)
}

// A claim's fork-of is the one agents.x-k8s.io/ annotation its Sandbox takes on (admission
// checked its author may run code in the parent); the others stay on the claim.
func TestAForkClaimsSandboxNamesItsParent(t *testing.T) {
	claim := claimOf("c").Annotation(agentsv1beta1.ForkOfAnnotation, "parent").
		Annotation(agentsv1beta1.PauseModeAnnotation, agentsv1beta1.PauseModeKeepMemory).Hub()
	g := newRig(t, pythonTemplate().Hub(), claim, warmPool("pool"))
	g.mustReconcile("c")
	ann := g.sandbox("c").Annotations
	if ann[agentsv1beta1.ForkOfAnnotation] != "parent" || ann[agentsv1beta1.PauseModeAnnotation] != "" {
		t.Errorf("the claim's Sandbox's annotations %v; want fork-of parent and no other agents.x-k8s.io/ key of the claim", ann)
	}
}
