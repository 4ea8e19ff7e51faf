package sandbox

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

func TestEgressCondition(t *testing.T) {
	applied := metav1.Condition{Type: agentsv1beta1.SandboxConditionEgressPolicy, Status: metav1.ConditionTrue,
		Reason: agentsv1beta1.ReasonEgressApplied, Message: "deny-all: NetworkPolicy sb allows no egress, DNS included"}
	cases := []struct {
		name       string
		before     *metav1.Condition
		st         egressState
		wantStatus metav1.ConditionStatus // "" when the condition must be absent
		wantReason string
		wantMsg    string
	}{
		{"nothing asked: no condition", nil, egressState{}, "", "", ""},
		{"annotations removed: the condition goes", &applied, egressState{}, "", "", ""},
		{"applied deny-all", nil, egressState{requested: true, applied: true, spec: egress.Spec{Mode: egress.DenyAll}},
			metav1.ConditionTrue, agentsv1beta1.ReasonEgressApplied, applied.Message},
		{"applied restricted names the CIDRs first", nil,
			egressState{requested: true, applied: true, spec: egress.Spec{Mode: egress.Restricted, CIDRs: []string{"10.0.0.0/8"}}},
			metav1.ConditionTrue, agentsv1beta1.ReasonEgressApplied,
			"restricted to 10.0.0.0/8: NetworkPolicy sb allows egress to these CIDRs and DNS (UDP and TCP port 53) to the cluster DNS only"},
		{"applied allow-all", nil, egressState{requested: true, applied: true, spec: egress.Spec{Mode: egress.AllowAll}},
			metav1.ConditionTrue, agentsv1beta1.ReasonEgressApplied, "allow-all: NetworkPolicy sb allows egress anywhere but link-local addresses (cloud metadata) an admin has not opened"},
		{"ignored on a template's Sandbox: False, the pod runs", nil, egressState{requested: true, ignored: "made from a template"},
			metav1.ConditionFalse, agentsv1beta1.ReasonEgressIgnored, "made from a template"},
		{"invalid", &applied, egressState{requested: true, reason: agentsv1beta1.ReasonInvalidEgress, message: "bad"},
			metav1.ConditionFalse, agentsv1beta1.ReasonInvalidEgress, "bad"},
		{"conflict", nil, egressState{requested: true, reason: agentsv1beta1.ReasonEgressPolicyConflict, message: "theirs"},
			metav1.ConditionFalse, agentsv1beta1.ReasonEgressPolicyConflict, "theirs"},
		{"a failed write keeps what was last in force", &applied, egressState{requested: true, spec: egress.Spec{Mode: egress.Restricted}},
			metav1.ConditionTrue, agentsv1beta1.ReasonEgressApplied, applied.Message},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb"}}
			if tc.before != nil {
				sb.Status.Conditions = []metav1.Condition{*tc.before}
			}
			setEgressCondition(sb, tc.st)
			got := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionEgressPolicy)
			switch {
			case tc.wantStatus == "" && got != nil:
				t.Errorf("condition = %+v, want none", got)
			case tc.wantStatus == "":
			case got == nil:
				t.Errorf("no condition, want %s/%s", tc.wantStatus, tc.wantReason)
			case got.Status != tc.wantStatus || got.Reason != tc.wantReason || got.Message != tc.wantMsg:
				t.Errorf("condition = %s/%s %q, want %s/%s %q", got.Status, got.Reason, got.Message, tc.wantStatus, tc.wantReason, tc.wantMsg)
			}
		})
	}
}

func TestReadyConditionWhenEgressBlocksThePod(t *testing.T) {
	blocked := egressState{requested: true, reason: agentsv1beta1.ReasonInvalidEgress, message: "annotation agents.x-k8s.io/egress: unknown egress mode"}
	cases := []struct {
		name       string
		obs        observed
		paused     bool
		wantReason string
	}{
		{"no pod: Ready says why", observed{egress: blocked}, false, agentsv1beta1.ReasonInvalidEgress},
		{"a running pod is kept and reported as it is", observed{egress: blocked, pod: aPod().phase("Running").ready().ip("10.0.0.1").pod}, false, agentsv1beta1.ReasonReady},
		{"paused says paused", observed{egress: blocked}, true, agentsv1beta1.ReasonPaused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := &agentsv1beta1.Sandbox{}
			if tc.paused {
				sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
			}
			got := readyCondition(sb, tc.obs, nil)
			if got.Reason != tc.wantReason {
				t.Errorf("Ready reason = %s (%s), want %s", got.Reason, got.Message, tc.wantReason)
			}
			if tc.wantReason == agentsv1beta1.ReasonInvalidEgress && got.Message != blocked.message {
				t.Errorf("Ready message = %q, want the egress problem %q", got.Message, blocked.message)
			}
		})
	}
}
