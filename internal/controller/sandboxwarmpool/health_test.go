package sandboxwarmpool

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// testNow is the fixed clock of these tests.
var testNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// member is a pool member created age ago, with the Sandbox controller's Ready condition (none
// when status is empty).
func member(name string, age time.Duration, status metav1.ConditionStatus, reason, message string) *agentsv1beta1.Sandbox {
	w := testwrap.MakeSandbox("ns", name).Created(testNow.Add(-age))
	if status != "" {
		w.Condition(metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: status, Reason: reason, Message: message})
	}
	return w.Hub()
}

func ready(name string, age time.Duration) *agentsv1beta1.Sandbox {
	return member(name, age, metav1.ConditionTrue, agentsv1beta1.ReasonReady, "")
}

func starting(name string, age time.Duration) *agentsv1beta1.Sandbox {
	return member(name, age, metav1.ConditionFalse, agentsv1beta1.ReasonPodNotReady, "container runtime not ready")
}

func unschedulableMember(name string, age time.Duration) *agentsv1beta1.Sandbox {
	return member(name, age, metav1.ConditionFalse, agentsv1beta1.ReasonPodPending, "Pod is pending: Unschedulable: 0/3 nodes are available")
}

func names(sbs []*agentsv1beta1.Sandbox) []string {
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.Name)
	}
	return out
}

func TestAssess(t *testing.T) {
	const timeout = 5 * time.Minute
	cases := []struct {
		name              string
		members           []*agentsv1beta1.Sandbox
		wantUnschedulable []string
		wantOverdue       []string
		wantNextDue       time.Duration
	}{
		{"ready members need nothing", []*agentsv1beta1.Sandbox{ready("a", time.Hour)}, nil, nil, 0},
		{"a starting member is due when the timeout runs out", []*agentsv1beta1.Sandbox{starting("a", time.Minute)}, nil, nil, 4 * time.Minute},
		{"the next due is the soonest", []*agentsv1beta1.Sandbox{starting("a", time.Minute), starting("b", 3*time.Minute)}, nil, nil, 2 * time.Minute},
		{"past the timeout it is overdue", []*agentsv1beta1.Sandbox{starting("a", 6*time.Minute)}, nil, []string{"a"}, 0},
		{"at the timeout it is overdue", []*agentsv1beta1.Sandbox{starting("a", timeout)}, nil, []string{"a"}, 0},
		{"a member without a Ready condition counts by its age", []*agentsv1beta1.Sandbox{member("a", 10*time.Minute, "", "", "")}, nil, []string{"a"}, 0},
		{"an unschedulable member is kept, however old", []*agentsv1beta1.Sandbox{unschedulableMember("a", time.Hour)}, []string{"a"}, nil, 0},
		{"pending for another reason counts by its age", []*agentsv1beta1.Sandbox{member("a", time.Hour, metav1.ConditionFalse, agentsv1beta1.ReasonPodPending, "Pod is pending: not scheduled yet")},
			nil, []string{"a"}, 0},
		{"a mixed pool", []*agentsv1beta1.Sandbox{ready("r", time.Hour), unschedulableMember("u", time.Minute), starting("old", time.Hour), starting("new", 30*time.Second)},
			[]string{"u"}, []string{"old"}, 4*time.Minute + 30*time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := assess(tc.members, testNow, timeout)
			if d := cmp.Diff(tc.wantUnschedulable, names(h.unschedulable)); d != "" {
				t.Errorf("unschedulable (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantOverdue, names(h.overdue)); d != "" {
				t.Errorf("overdue (-want +got):\n%s", d)
			}
			if h.nextDue != tc.wantNextDue {
				t.Errorf("next due in %s, want %s", h.nextDue, tc.wantNextDue)
			}
		})
	}
}

func TestReadyCondition(t *testing.T) {
	pool := testwrap.MakeWarmPool("ns", "pool").Template("python").Replicas(2).Generation(3).Hub()
	stuck := unschedulableMember("pool-x1", time.Minute)
	cases := []struct {
		name          string
		ready         int
		h             health
		templateFound bool
		want          metav1.Condition
	}{
		{"full", 2, health{}, true, metav1.Condition{Status: metav1.ConditionTrue, Reason: extv1beta1.ReasonPoolReady, Message: "2 of 2 sandboxes ready"}},
		{"more than full (a scale-down under way)", 3, health{}, true, metav1.Condition{Status: metav1.ConditionTrue, Reason: extv1beta1.ReasonPoolReady, Message: "3 of 2 sandboxes ready"}},
		{"filling", 1, health{}, true, metav1.Condition{Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonPoolFilling, Message: "1 of 2 sandboxes ready"}},
		{"unschedulable members say why", 1, health{unschedulable: []*agentsv1beta1.Sandbox{stuck}}, true,
			metav1.Condition{Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonMembersUnschedulable,
				Message: "1 of the pool's sandboxes cannot be scheduled (e.g. pool-x1: Pod is pending: Unschedulable: 0/3 nodes are available)"}},
		{"a missing template comes first", 2, health{unschedulable: []*agentsv1beta1.Sandbox{stuck}}, false,
			metav1.Condition{Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonPoolTemplateNotFound, Message: `SandboxTemplate "python" not found`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			want.Type, want.ObservedGeneration = extv1beta1.PoolConditionReady, 3
			if d := cmp.Diff(want, readyCondition(pool, tc.ready, tc.h, tc.templateFound)); d != "" {
				t.Errorf("Ready condition (-want +got):\n%s", d)
			}
		})
	}
}

func TestMemberReadyTimeout(t *testing.T) {
	cases := []struct {
		name       string
		annotation string
		configured time.Duration
		want       time.Duration
	}{
		{"the default", "", 0, DefaultMemberReadyTimeout},
		{"the controller's setting", "", 2 * time.Minute, 2 * time.Minute},
		{"the pool's annotation wins", "10m", 2 * time.Minute, 10 * time.Minute},
		{"an annotation that is no duration is ignored", "ten minutes", 2 * time.Minute, 2 * time.Minute},
		{"a zero annotation is ignored", "0s", 0, DefaultMemberReadyTimeout},
		{"a negative annotation is ignored", "-1m", 0, DefaultMemberReadyTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := testwrap.MakeWarmPool("ns", "pool")
			if tc.annotation != "" {
				w.Annotation(extv1beta1.MemberReadyTimeoutAnnotation, tc.annotation)
			}
			r := New(nil, Options{MemberReadyTimeout: tc.configured})
			if got := r.readyTimeoutOf(w.Hub()); got != tc.want {
				t.Errorf("timeout %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTheClockIsInjected(t *testing.T) {
	r := New(nil, Options{Clock: clocktesting.NewFakePassiveClock(testNow)})
	if got := r.clock.Now(); !got.Equal(testNow) {
		t.Errorf("now = %s, want the injected clock's %s", got, testNow)
	}
	if got := New(nil, Options{}).clock.Now(); time.Since(got) > time.Minute {
		t.Errorf("now without a clock = %s, want the wall clock", got)
	}
}
