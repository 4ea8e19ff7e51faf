package sandboxwarmpool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/expectations"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func TestSurplusRemovesNotReadyMembersFirstThenTheNewest(t *testing.T) {
	active := []*agentsv1beta1.Sandbox{
		ready("ready-old", time.Hour), starting("starting-old", 3*time.Minute), ready("ready-new", time.Minute),
		starting("starting-new", time.Second), ready("ready-mid", 10*time.Minute),
	}
	cases := []struct {
		n    int
		want []string
	}{
		{0, []string{}},
		{1, []string{"starting-new"}},
		{2, []string{"starting-new", "starting-old"}},
		{3, []string{"starting-new", "starting-old", "ready-new"}},
		{5, []string{"starting-new", "starting-old", "ready-new", "ready-mid", "ready-old"}},
		{9, []string{"starting-new", "starting-old", "ready-new", "ready-mid", "ready-old"}},
	}
	for _, tc := range cases {
		m := membership{active: active}
		got := names(m.surplus(tc.n))
		if got == nil {
			got = []string{}
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("surplus(%d) (-want +got):\n%s", tc.n, d)
		}
	}
	if names(active)[0] != "ready-old" {
		t.Error("surplus reordered the pool's members")
	}
}

func TestCountIncludesCreatesNotYetSeen(t *testing.T) {
	m := membership{active: []*agentsv1beta1.Sandbox{ready("a", time.Minute)}, pending: 2}
	if got := m.count(); got != 3 {
		t.Errorf("count = %d, want 1 member plus 2 creates in flight", got)
	}
}

// poolAndTemplate is a pool of three and its template python.
func poolAndTemplate() (*extv1beta1.SandboxWarmPool, *extv1beta1.SandboxTemplate) {
	return testwrap.MakeWarmPool("ns", "pool").Template("python").Replicas(3).Hub(), testwrap.MakeTemplate("ns", "python").Hub()
}

// built is a member made from tmpl (fresh), with the given name, UID and readiness.
func built(pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, name string, isReady bool) agentsv1beta1.Sandbox {
	sb := NewMember(pool, tmpl, blueprint.Builder{})
	sb.Name, sb.UID = name, types.UID(name+"-uid")
	if isReady {
		sb.Status.Conditions = ready(name, 0).Status.Conditions
	}
	return *sb
}

func TestClassify(t *testing.T) {
	pool, tmpl := poolAndTemplate()
	edited := testwrap.MakeTemplate("ns", "python").Image("sandbox-runtime:v2").Hub()
	other := testwrap.MakeTemplate("ns", "node").Hub()
	deleting := built(pool, tmpl, "deleting", true)
	deleting.DeletionTimestamp = &metav1.Time{Time: testNow}
	cases := []struct {
		name       string
		members    []agentsv1beta1.Sandbox
		tmpl       *extv1beta1.SandboxTemplate
		wantActive []string
		wantStale  []string
		wantReady  int
		wantEdited []string
	}{
		{"fresh members, ready counted", []agentsv1beta1.Sandbox{built(pool, tmpl, "a", true), built(pool, tmpl, "b", false)}, tmpl,
			[]string{"a", "b"}, nil, 1, nil},
		{"a member being deleted is not active", []agentsv1beta1.Sandbox{built(pool, tmpl, "a", true), deleting}, tmpl,
			[]string{"a"}, nil, 1, nil},
		{"members of an older pod spec are stale", []agentsv1beta1.Sandbox{built(pool, tmpl, "old", true), built(pool, edited, "new", false)}, edited,
			[]string{"old", "new"}, []string{"old"}, 1, nil},
		{"members of another template are stale", []agentsv1beta1.Sandbox{built(pool, other, "node", true)}, tmpl,
			[]string{"node"}, []string{"node"}, 1, nil},
		{"without the template nothing is stale", []agentsv1beta1.Sandbox{built(pool, other, "node", true)}, nil,
			[]string{"node"}, nil, 1, nil},
		{"a member whose spec changed since the pool made it is edited", []agentsv1beta1.Sandbox{built(pool, tmpl, "a", true), generation(built(pool, tmpl, "b", true), 2)}, tmpl,
			[]string{"a", "b"}, nil, 2, []string{"b"}},
		{"an edited member is edited without the template too", []agentsv1beta1.Sandbox{generation(built(pool, tmpl, "b", true), 3)}, nil,
			[]string{"b"}, nil, 1, []string{"b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := classify(pool, tc.members, tc.tmpl, blueprint.Builder{}, newMemberWrites(clocktesting.NewFakePassiveClock(testNow)))
			if d := cmp.Diff(tc.wantActive, names(m.active)); d != "" {
				t.Errorf("active (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantStale, names(m.stale)); d != "" {
				t.Errorf("stale (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantEdited, names(m.edited)); d != "" {
				t.Errorf("edited (-want +got):\n%s", d)
			}
			if m.ready != tc.wantReady || m.pending != 0 {
				t.Errorf("ready %d pending %d, want %d and 0", m.ready, m.pending, tc.wantReady)
			}
		})
	}
}

func generation(sb agentsv1beta1.Sandbox, n int64) agentsv1beta1.Sandbox {
	sb.Generation = n
	return sb
}

// The writes this controller made but the cache does not show yet still count.
func TestClassifyCountsWritesNotYetSeen(t *testing.T) {
	pool, tmpl := poolAndTemplate()
	key := client.ObjectKeyFromObject(pool)
	exp := newMemberWrites(clocktesting.NewFakePassiveClock(testNow))
	exp.created(key, "pool-new")
	exp.deleted(key, "gone-uid")
	members := []agentsv1beta1.Sandbox{built(pool, tmpl, "kept", true), built(pool, tmpl, "gone", true)}
	m := classify(pool, members, tmpl, blueprint.Builder{}, exp)
	if d := cmp.Diff([]string{"kept"}, names(m.active)); d != "" {
		t.Errorf("active (-want +got), a member we deleted is not active while the cache lags:\n%s", d)
	}
	if m.pending != 1 || m.count() != 2 {
		t.Errorf("pending %d count %d, want the unseen create counted: 1 and 2", m.pending, m.count())
	}
}

// A write the cache never shows stops counting after expectations.CacheLag, like every other
// controller's: a lost watch event must not freeze the pool.
func TestUnseenWritesExpireAfterTheCacheLag(t *testing.T) {
	tests := []struct {
		name        string
		wait        time.Duration
		wantPending bool
	}{
		{name: "still counted at the cache lag", wait: expectations.CacheLag, wantPending: true},
		{name: "dropped after the cache lag", wait: expectations.CacheLag + time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, _ := poolAndTemplate()
			key := client.ObjectKeyFromObject(pool)
			clk := clocktesting.NewFakeClock(testNow)
			exp := newMemberWrites(clk)
			exp.created(key, "pool-new")
			exp.deleted(key, "gone-uid")
			clk.Step(tt.wait)
			if got := exp.pendingCreates(key); got != tt.wantPending {
				t.Errorf("pendingCreates = %v, want %v", got, tt.wantPending)
			}
			// The delete is pending while its member is still cached and not going away.
			gone := agentsv1beta1.Sandbox{}
			gone.UID = "gone-uid"
			if got := exp.observe(key, []agentsv1beta1.Sandbox{gone})["gone-uid"]; got != tt.wantPending {
				t.Errorf("delete of gone-uid pending = %v, want %v", got, tt.wantPending)
			}
		})
	}
}

func TestNewMember(t *testing.T) {
	pool, tmpl := poolAndTemplate()
	sb := NewMember(pool, tmpl, blueprint.Builder{})
	if sb.GenerateName != "pool-" || sb.Name != "" || sb.Namespace != "ns" {
		t.Errorf("member %s/%s generateName %q, want an unnamed member of ns named after the pool", sb.Namespace, sb.Name, sb.GenerateName)
	}
	if got := sb.Labels[extv1beta1.WarmPoolLabel]; got == "" || got != poolHash(pool) {
		t.Errorf("label %s = %q, want the pool's hash %q", extv1beta1.WarmPoolLabel, got, poolHash(pool))
	}
	other := testwrap.MakeWarmPool("ns", "other").Template("python").Hub()
	if poolHash(other) == poolHash(pool) {
		t.Errorf("pools pool and other share the label value %s", poolHash(pool))
	}
	fromTemplate := blueprint.Builder{}.NewSandbox(tmpl)
	for k, v := range fromTemplate.Labels {
		if sb.Labels[k] != v {
			t.Errorf("label %s = %q, want the blueprint's %q", k, sb.Labels[k], v)
		}
	}
	if isStale(sb, pool, (blueprint.Builder{}).Hash(tmpl)) {
		t.Error("a new member is stale")
	}
}

// A snapshot pool's members are forks of its prepared Sandbox; a plain pool's are not.
func TestAPoolNamingAPreparedSandboxMakesForksOfIt(t *testing.T) {
	pool, tmpl := poolAndTemplate()
	if sb := NewMember(pool, tmpl, blueprint.Builder{}); sb.Annotations[agentsv1beta1.ForkOfAnnotation] != "" {
		t.Errorf("a plain pool's member forks %q; want no fork", sb.Annotations[agentsv1beta1.ForkOfAnnotation])
	}
	pool.Annotations = map[string]string{agentsv1beta1.ForkOfAnnotation: "prepared"}
	if sb := NewMember(pool, tmpl, blueprint.Builder{}); sb.Annotations[agentsv1beta1.ForkOfAnnotation] != "prepared" {
		t.Errorf("a snapshot pool's member annotations %v; want a fork of prepared", sb.Annotations)
	}
}

func TestForEachParallel(t *testing.T) {
	t.Run("runs every index once, at most 8 at a time", func(t *testing.T) {
		var mu sync.Mutex
		seen := map[int]int{}
		var running, most atomic.Int32
		err := forEachParallel(context.Background(), 30, func(i int) error {
			now := running.Add(1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			mu.Lock()
			seen[i]++
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 30; i++ {
			if seen[i] != 1 {
				t.Errorf("index %d ran %d times, want once", i, seen[i])
			}
		}
		if most.Load() > 8 {
			t.Errorf("%d calls ran at once, want at most 8", most.Load())
		}
	})
	t.Run("returns an error of a call", func(t *testing.T) {
		boom := errors.New("create failed")
		err := forEachParallel(context.Background(), 5, func(i int) error {
			if i == 3 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Errorf("err = %v, want %v", err, boom)
		}
	})
	t.Run("starts nothing once the context is done", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var calls atomic.Int32
		err := forEachParallel(ctx, 5, func(int) error { calls.Add(1); return nil })
		if !errors.Is(err, context.Canceled) || calls.Load() != 0 {
			t.Errorf("err = %v after %d calls, want context.Canceled and none", err, calls.Load())
		}
	})
}
