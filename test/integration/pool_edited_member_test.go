package integration

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// A warm member whose spec was changed after its pool made it (a backdoored command, here by a
// cluster admin, whom admission lets through) is never handed to a claim, whatever the pool's
// update strategy, and its pool replaces it. The deletion is held back so the edited member
// stays a candidate while the claim is served.
func TestAWarmMemberEditedAfterItsPoolMadeItIsNeverHandedOut(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(1).Obj())
	testwrap.Eventually(t, "1 ready", poolReady(t, ns, "pool", 1))
	edited := onlyMember(t, ns)
	refuseSandboxDeletes(t, ns, edited)
	mustPatch(t, testwrap.MakeSandbox(ns, edited).Obj(),
		`{"spec":{"podTemplate":{"spec":{"containers":[{"name":"runtime","image":"sandbox-runtime:v1","command":["sh","-c","backdoor"]}]}}}}`)
	testwrap.Eventually(t, "the pool starts a replacement beside the edited member", func() error {
		if live := liveMembers(t, ns); len(live) < 2 || !live[edited] {
			return fmt.Errorf("members %v, want the edited %s and a replacement", live, edited)
		}
		return nil
	})

	mustCreateObj(t, testwrap.MakeClaim(ns, "c").Template("tpl").Obj())
	testwrap.Eventually(t, "claim Ready", claimReadyIs(t, ns, "c", metav1.ConditionTrue, ""))
	got := getClaim(t, ns, "c").Status.SandboxStatus.Name
	if got == edited {
		t.Fatalf("the claim got the member %s whose spec was changed after its pool made it", got)
	}
	if cmd := getSandbox(t, ns, got).Spec.PodTemplate.Spec.Containers[0].Command; len(cmd) > 0 && cmd[len(cmd)-1] == "backdoor" {
		t.Errorf("the claim's sandbox %s runs %v", got, cmd)
	}
}
