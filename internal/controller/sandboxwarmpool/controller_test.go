package sandboxwarmpool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/expectations"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/pacer"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// poolStatus is what a test asserts of the pool's status.
type poolStatus struct {
	Replicas, ReadyReplicas int32
	Ready                   metav1.ConditionStatus
	Reason, Message         string
}

func statusOf(p *extv1beta1.SandboxWarmPool) poolStatus {
	s := poolStatus{Replicas: p.Status.Replicas, ReadyReplicas: p.Status.ReadyReplicas}
	if c := meta.FindStatusCondition(p.Status.Conditions, extv1beta1.PoolConditionReady); c != nil {
		s.Ready, s.Reason, s.Message = c.Status, c.Reason, c.Message
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// countWrites counts the writes starting with prefix ("create Sandbox/", "delete Sandbox/").
func countWrites(writes []string, prefix string) int {
	n := 0
	for _, w := range writes {
		if strings.HasPrefix(w, prefix) {
			n++
		}
	}
	return n
}

func TestPoolKeepsItsReplicas(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := thePool(3).Hub()
	cases := []struct {
		name     string
		replicas int32
		maxBatch int
		members  []*agentsv1beta1.Sandbox

		wantCreates int
		wantDeleted []string
		wantStatus  *poolStatus // nil: not asserted
	}{
		{name: "an empty pool is filled", replicas: 3,
			wantCreates: 3,
			wantStatus:  &poolStatus{0, 0, metav1.ConditionFalse, extv1beta1.ReasonPoolFilling, "0 of 3 sandboxes ready"}},
		{name: "a refill creates no more than the batch", replicas: 5, maxBatch: 2,
			wantCreates: 2,
			wantStatus:  &poolStatus{0, 0, metav1.ConditionFalse, extv1beta1.ReasonPoolFilling, "0 of 5 sandboxes ready"}},
		{name: "a full pool is left alone and reports Ready", replicas: 2,
			members:    []*agentsv1beta1.Sandbox{readyMember(pool, tmpl, "a", time.Hour), readyMember(pool, tmpl, "b", time.Hour)},
			wantStatus: &poolStatus{2, 2, metav1.ConditionTrue, extv1beta1.ReasonPoolReady, "2 of 2 sandboxes ready"}},
		{name: "members still starting count toward the replicas", replicas: 2,
			members:    []*agentsv1beta1.Sandbox{readyMember(pool, tmpl, "a", time.Hour), startingMember(pool, tmpl, "b", time.Minute)},
			wantStatus: &poolStatus{2, 1, metav1.ConditionFalse, extv1beta1.ReasonPoolFilling, "1 of 2 sandboxes ready"}},
		{name: "scaling down removes members not ready first, then the newest", replicas: 1,
			members: []*agentsv1beta1.Sandbox{readyMember(pool, tmpl, "old", time.Hour), readyMember(pool, tmpl, "new", time.Minute),
				startingMember(pool, tmpl, "starting", time.Second)},
			wantDeleted: []string{"new", "starting"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{tmpl, thePool(tc.replicas).Hub()}
			for _, m := range tc.members {
				objs = append(objs, m)
			}
			g := newRig(t, Options{MaxBatch: tc.maxBatch}, objs...)
			before := g.members()
			g.mustReconcile()
			after := g.members()

			created := 0
			for name, sb := range after {
				if before[name] != nil {
					continue
				}
				created++
				if !strings.HasPrefix(name, "pool-") || sb.Labels[extv1beta1.WarmPoolLabel] != poolHash(g.pool()) ||
					sb.Labels[extv1beta1.TemplateHashLabel] != (blueprint.Builder{}).Hash(tmpl) {
					t.Errorf("new member %s labels %v, want a pool-* member labelled with the pool and the template's hash", name, sb.Labels)
				}
			}
			if created != tc.wantCreates {
				t.Errorf("created %d members, want %d", created, tc.wantCreates)
			}
			var deleted []string
			for name := range before {
				if after[name] == nil {
					deleted = append(deleted, name)
				}
			}
			slices.Sort(deleted)
			if d := cmp.Diff(tc.wantDeleted, deleted); d != "" {
				t.Errorf("deleted members (-want +got):\n%s", d)
			}
			if tc.wantStatus != nil {
				if d := cmp.Diff(*tc.wantStatus, statusOf(g.pool())); d != "" {
					t.Errorf("status (-want +got):\n%s", d)
				}
			}
		})
	}
}

// A reconcile that runs before the cache shows the members it just created (or the deletes it
// just made) neither creates them again nor deletes more; a write the cache never shows stops
// counting after expectations.CacheLag, so a lost watch event does not freeze the pool.
func TestPoolOnALaggingCache(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	t.Run("creates", func(t *testing.T) {
		g := newRig(t, Options{}, tmpl, thePool(2).Hub())
		g.freezeCache()
		g.mustReconcile()
		if n := countWrites(g.takeWrites(), "create Sandbox/"); n != 2 {
			t.Fatalf("first reconcile created %d members, want 2", n)
		}
		g.mustReconcile()
		if w := g.takeWrites(); countWrites(w, "create") != 0 {
			t.Errorf("a reconcile on the stale cache wrote %q, want no second set of members", w)
		}
		g.clock.Step(expectations.CacheLag + time.Second)
		g.mustReconcile()
		if n := countWrites(g.takeWrites(), "create Sandbox/"); n != 2 {
			t.Errorf("after the creates went unseen for %v, created %d members, want 2 (the pool must not freeze)", expectations.CacheLag, n)
		}
	})
	t.Run("deletes", func(t *testing.T) {
		pool := thePool(1).Hub()
		g := newRig(t, Options{}, tmpl, pool, readyMember(pool, tmpl, "a", time.Hour), readyMember(pool, tmpl, "b", time.Minute),
			readyMember(pool, tmpl, "c", time.Second))
		g.freezeCache()
		g.mustReconcile()
		if n := countWrites(g.takeWrites(), "delete Sandbox/"); n != 2 {
			t.Fatalf("first reconcile deleted %d members, want 2", n)
		}
		g.mustReconcile()
		if w := g.takeWrites(); countWrites(w, "create") != 0 || countWrites(w, "delete") != 0 {
			t.Errorf("a reconcile on the stale cache wrote %q, want no member written (its deletes are in flight)", w)
		}
		if d := cmp.Diff([]string{"a"}, sortedKeys(g.members())); d != "" {
			t.Errorf("members left (-want +got):\n%s", d)
		}
	})
}

// A member that is not Ready in time is replaced, and its pool's owner told why; one the
// scheduler cannot place is kept (a replacement would not fit either) and reported.
func TestPoolReplacesMembersThatNeverBecomeReady(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := thePool(1).Hub()
	unschedulable := poolMember(pool, tmpl, "pending", time.Hour).Condition(metav1.Condition{Type: agentsv1beta1.SandboxConditionReady,
		Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonPodPending, Message: "Pod is pending: Unschedulable: 0/3 nodes are available"}).Hub()
	cases := []struct {
		name        string
		pool        *extv1beta1.SandboxWarmPool
		member      *agentsv1beta1.Sandbox
		wantKept    bool
		wantRequeue time.Duration
		wantEvents  []string
		wantReason  string
	}{
		{name: "starting within the timeout: kept, and looked at again when it runs out",
			pool: pool, member: startingMember(pool, tmpl, "m", time.Minute),
			wantKept: true, wantRequeue: DefaultMemberReadyTimeout - time.Minute, wantReason: extv1beta1.ReasonPoolFilling},
		{name: "past the timeout: replaced",
			pool: pool, member: startingMember(pool, tmpl, "m", DefaultMemberReadyTimeout+time.Second),
			wantEvents: []string{"Warning MemberNotReady replacing warm sandbox m: not Ready 5m0s after it was created (PodNotReady: container runtime not ready)"},
			wantReason: extv1beta1.ReasonPoolFilling},
		{name: "the pool's own longer timeout keeps it",
			pool:   thePool(1).Annotation(extv1beta1.MemberReadyTimeoutAnnotation, "10m").Hub(),
			member: startingMember(pool, tmpl, "m", 6*time.Minute), wantKept: true, wantRequeue: 4 * time.Minute,
			wantReason: extv1beta1.ReasonPoolFilling},
		{name: "unschedulable: kept and reported",
			pool: pool, member: unschedulable, wantKept: true,
			wantEvents: []string{"Warning MembersUnschedulable 1 warm sandboxes cannot be scheduled; they are kept, not replaced"},
			wantReason: extv1beta1.ReasonMembersUnschedulable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, Options{}, tmpl, tc.pool, tc.member)
			res := g.mustReconcile()
			members := g.members()
			if _, kept := members[tc.member.Name]; kept != tc.wantKept {
				t.Errorf("member kept = %v, want %v", kept, tc.wantKept)
			}
			if !tc.wantKept && len(members) != 1 {
				t.Errorf("members %v, want the replaced one's replacement", sortedKeys(members))
			}
			if res.RequeueAfter != tc.wantRequeue {
				t.Errorf("requeue after %v, want %v", res.RequeueAfter, tc.wantRequeue)
			}
			if d := cmp.Diff(tc.wantEvents, g.emitted()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if got := statusOf(g.pool()); got.Ready != metav1.ConditionFalse || got.Reason != tc.wantReason {
				t.Errorf("Ready %s/%s %q, want False/%s", got.Ready, got.Reason, got.Message, tc.wantReason)
			}
		})
	}
}

// After a template edit, a Recreate pool replaces its members at once; an OnReplenish pool
// keeps them until they are claimed.
func TestTemplateEditReplacesMembersPerUpdateStrategy(t *testing.T) {
	old := pythonTemplate().Hub()
	edited := testwrap.MakeTemplate("ns", "python").UID("python-uid-2").Image("python:3.14").Hub()
	cases := []struct {
		name        string
		strategy    extv1beta1.SandboxWarmPoolUpdateStrategyType
		wantStale   int
		wantCreates int
	}{
		{"Recreate: replaced", extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType, 0, 2},
		{"OnReplenish: kept", extv1beta1.OnReplenishSandboxWarmPoolUpdateStrategyType, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := thePool(2).UpdateStrategy(extv1alpha1.SandboxWarmPoolUpdateStrategyType(tc.strategy)).Hub()
			g := newRig(t, Options{}, edited, pool, readyMember(pool, old, "a", time.Hour), readyMember(pool, old, "b", time.Hour))
			g.mustReconcile()
			stale := 0
			for _, sb := range g.members() {
				if isStale(sb, pool, (blueprint.Builder{}).Hash(edited)) {
					stale++
				}
			}
			if n := countWrites(g.takeWrites(), "create Sandbox/"); stale != tc.wantStale || n != tc.wantCreates {
				t.Errorf("%d stale members left and %d created, want %d and %d", stale, n, tc.wantStale, tc.wantCreates)
			}
		})
	}
}

// Between the pool's read and its delete a claim can take a member over: the delete's
// resourceVersion precondition fails, and the claim keeps its Sandbox.
func TestScaleDownNeverDeletesAMemberAClaimTook(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := thePool(0).Hub()
	g := newRig(t, Options{}, tmpl, pool, readyMember(pool, tmpl, "m", time.Hour))
	g.freezeCache()
	claim := testwrap.MakeClaim("ns", "c").UID("c-uid").Hub()
	taken := g.members()["m"]
	taken.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	if err := g.api.Update(context.Background(), taken); err != nil {
		t.Fatal(err)
	}
	g.mustReconcile()
	if err := g.api.Get(context.Background(), client.ObjectKeyFromObject(taken), &agentsv1beta1.Sandbox{}); err != nil {
		t.Errorf("the claimed Sandbox: %v, want it kept", err)
	}
}

func TestPoolReportsFailures(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	boom := apierrors.NewInternalError(errors.New("etcd timeout"))
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes"}, "",
		errors.New("namespace ns is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	cases := []struct {
		name       string
		objs       []client.Object
		faultVerb  string
		faultKind  string
		fault      error
		wantErr    bool
		wantEvents []string
		wantStatus poolStatus
	}{
		{name: "the template is missing: no members, and said so",
			objs:       []client.Object{thePool(2).Hub()},
			wantEvents: []string{`Warning TemplateNotFound SandboxTemplate "python" not found`},
			wantStatus: poolStatus{0, 0, metav1.ConditionFalse, extv1beta1.ReasonPoolTemplateNotFound, `SandboxTemplate "python" not found`}},
		{name: "a create fails: retried, and said so",
			objs: []client.Object{tmpl, thePool(1).Hub()}, faultVerb: "create", faultKind: "Sandbox", fault: boom, wantErr: true,
			wantEvents: []string{"Warning SandboxCreateFailed creating a warm sandbox: Internal error occurred: etcd timeout"},
			wantStatus: poolStatus{0, 0, metav1.ConditionFalse, extv1beta1.ReasonPoolFilling, "0 of 1 sandboxes ready"}},
		{name: "a create refused in a terminating namespace: retried quietly",
			objs: []client.Object{tmpl, thePool(1).Hub()}, faultVerb: "create", faultKind: "Sandbox", fault: terminating, wantErr: true,
			wantStatus: poolStatus{0, 0, metav1.ConditionFalse, extv1beta1.ReasonPoolFilling, "0 of 1 sandboxes ready"}},
		{name: "the status write fails: retried",
			objs: []client.Object{tmpl, thePool(0).Hub()}, faultVerb: "status", faultKind: "SandboxWarmPool", fault: boom, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, Options{}, tc.objs...)
			if tc.fault != nil {
				g.failWrites(tc.faultVerb, tc.faultKind, tc.fault)
			}
			if _, err := g.reconcile(); (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error %v, want one: %v", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.wantEvents, g.emitted()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantStatus, statusOf(g.pool())); d != "" {
				t.Errorf("status (-want +got):\n%s", d)
			}
			if len(g.members()) != 0 {
				t.Errorf("members %v, want none", sortedKeys(g.members()))
			}
		})
	}
}

// While claims are being served the refill waits, so they get the API server first, unless the
// pool is below its low water mark (a fifth of its replicas): then it refills at full speed,
// since a drained pool sends every claim cold.
func TestRefillYieldsToClaimsUnlessThePoolRunsLow(t *testing.T) {
	tmpl, pool := pythonTemplate().Hub(), thePool(10).Hub()
	members := func(n int) []client.Object {
		objs := []client.Object{tmpl, pool}
		for i := range n {
			objs = append(objs, readyMember(pool, tmpl, fmt.Sprintf("m%d", i), time.Minute))
		}
		return objs
	}
	tests := []struct {
		name        string
		objs        []client.Object
		wantCreates int // 0: held back, requeued after the pacer's quiet time
	}{
		{"a fifth of its replicas: it waits", members(2), 0},
		{"half of its replicas: it waits", members(5), 0},
		{"below a fifth: it refills, more than a trickle", members(1), 9},
		{"empty: it refills at once", members(0), 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pacer.NewPacer(time.Hour, clocktesting.NewFakeClock(testNow))
			done := p.ClaimStarted()
			defer done()
			g := newRig(t, Options{Gate: pacer.NewGate(p, time.Hour)}, tt.objs...)
			res := g.mustReconcile()
			creates := 0
			for _, w := range g.takeWrites() {
				if strings.HasPrefix(w, "create Sandbox/") {
					creates++
				}
			}
			if creates != tt.wantCreates {
				t.Errorf("%d members created while a claim is served, want %d", creates, tt.wantCreates)
			}
			if tt.wantCreates == 0 && res.RequeueAfter != time.Hour {
				t.Errorf("requeue after %v, want the pacer's quiet time (1h)", res.RequeueAfter)
			}
		})
	}
}

func TestReconcileLeavesGoneAndDeletingPoolsAlone(t *testing.T) {
	cases := []struct {
		name string
		objs []client.Object
	}{
		{"the pool is gone", nil},
		{"the pool is being deleted", []client.Object{thePool(2).Finalizers("test/hold").Deleting(testNow).Hub()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t, Options{}, append(tc.objs, pythonTemplate().Hub())...)
			if res := g.mustReconcile(); res.RequeueAfter != 0 {
				t.Errorf("requeue after %v, want none", res.RequeueAfter)
			}
			if w := g.takeWrites(); len(w) != 0 {
				t.Errorf("writes %q, want none", w)
			}
		})
	}
}
