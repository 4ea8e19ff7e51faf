package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// An agent session (docs/integrations.md) patches its claim's Sandbox with spec.shutdownTime as a TTL safety net and expects
// the Sandbox to be cleaned up. The contract defaults shutdownPolicy to Retain, which
// "keeps the Sandbox when expired (Status will show Expired)" and deletes only the pod and
// Service; upstream does the same. So the patch alone stops the pod and keeps the Sandbox and the
// claim, and both say so (condition and event); adding shutdownPolicy Delete to the patch removes
// the Sandbox, and the claim reports it missing until the integrator's terminate() deletes it.
func TestAgentSessionShutdownTimePatchOnAClaimsSandbox(t *testing.T) {
	cases := []struct {
		name        string
		extra       string // more of the merge patch's spec
		wantSandbox bool
		claimReason string
	}{
		{"shutdownTime alone (Retain): pod gone, Sandbox and claim kept and say expired", "", true, agentsv1alpha1.ReasonExpired},
		{"with shutdownPolicy Delete: Sandbox gone, claim says missing", `,"shutdownPolicy":"Delete"`, false, extv1alpha1.ReasonSandboxMissing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeClaim(ns, "session").Template("tpl").WarmPool("none").Obj())
			setPodStatus(t, waitForPod(t, ns, "session"), running("10.0.3.1"))
			testwrap.Eventually(t, "claim Ready", claimReadyIs(t, ns, "session", metav1.ConditionTrue, ""))

			at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
			sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: getClaim(t, ns, "session").Status.SandboxStatus.Name}}
			patch := fmt.Sprintf(`{"spec":{"shutdownTime":%q%s}}`, at, tc.extra)
			if err := k8s.Patch(context.Background(), sb, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
				t.Fatalf("the agent session's TTL patch: %v", err)
			}

			testwrap.Eventually(t, "pod deleted at shutdownTime", exists(podOf(ns, sb.Name), false))
			testwrap.Eventually(t, "Sandbox presence", exists(sb.DeepCopy(), tc.wantSandbox))
			testwrap.Eventually(t, "claim Ready=False/"+tc.claimReason, claimReadyIs(t, ns, "session", metav1.ConditionFalse, tc.claimReason))
			if err := exists(&extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "session"}}, true)(); err != nil {
				t.Errorf("the claim: %v; expiry of its Sandbox must not delete it", err)
			}
			if !tc.wantSandbox {
				return
			}
			testwrap.Eventually(t, "Sandbox Ready=False/SandboxExpired", readyIs(t, ns, sb.Name, metav1.ConditionFalse, agentsv1alpha1.ReasonExpired))
			for kind, conds := range map[string][]metav1.Condition{
				"Sandbox": getSandbox(t, ns, sb.Name).Status.Conditions,
				"claim":   getClaim(t, ns, "session").Status.Conditions,
			} {
				if msg := readyMessage(conds); !containsAll(msg, "expired at "+at, "retained", "shutdownPolicy Delete") {
					t.Errorf("%s Ready message %q, want it to say when it expired, that it was retained, and how to have it deleted", kind, msg)
				}
			}
			testwrap.Eventually(t, "a SandboxExpired event on the Sandbox", eventNames(ns, "Sandbox", sb.Name, corev1.EventTypeNormal,
				agentsv1alpha1.ReasonExpired, "retained", "shutdownPolicy Delete"))
			testwrap.Eventually(t, "a SandboxExpired event on the claim", eventNames(ns, "SandboxClaim", "session", corev1.EventTypeNormal,
				agentsv1alpha1.ReasonExpired, sb.Name, "retained"))
		})
	}
}

func readyMessage(conds []metav1.Condition) string {
	for _, c := range conds {
		if c.Type == agentsv1alpha1.SandboxConditionReady {
			return c.Message
		}
	}
	return ""
}

// eventNames checks for an event of eventType and reason on the object whose message names
// every one of names.
func eventNames(ns, kind, name, eventType, reason string, names ...string) func() error {
	return func() error {
		events := &corev1.EventList{}
		sel := fields.SelectorFromSet(fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "reason": reason})
		if err := k8s.List(context.Background(), events, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: sel}); err != nil {
			return err
		}
		var seen []string
		for _, e := range events.Items {
			if e.Type == eventType && containsAll(e.Message, names...) {
				return nil
			}
			seen = append(seen, e.Type+": "+e.Message)
		}
		return fmt.Errorf("no %s %s event on %s %s naming %v yet (seen: %s)", eventType, reason, kind, name, names, strings.Join(seen, "; "))
	}
}
