package integration

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// A warm member whose spec was changed after its pool made it (a backdoored command, here by a
// cluster admin, whom admission lets through) is never handed to a claim, whatever the pool's
// update strategy. The pool's deletion of it is held back so that it stays a candidate while
// the claim is served.
func TestAWarmMemberEditedAfterItsPoolMadeItIsNeverHandedOut(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(1).Obj())
	testwrap.Eventually(t, "1 ready", poolReady(t, ns, "pool", 1))
	edited := onlyMember(t, ns)
	refuseSandboxDeletes(t, ns, edited)
	mustPatch(t, testwrap.MakeSandbox(ns, edited).Obj(),
		`{"spec":{"podTemplate":{"spec":{"containers":[{"name":"runtime","image":"sandbox-runtime:v1","command":["sh","-c","backdoor"]}]}}}}`)
	// The pool tries to replace it (its delete is held back); one more replica shows the
	// controller's cache has the edit while the edited member is still a candidate.
	patchPoolReplicas(t, testwrap.MakeWarmPool(ns, "pool").Obj(), 2)
	got := claimBeside(t, ns, "pool", edited)
	if got == edited {
		t.Fatalf("the claim got the member %s whose spec was changed after its pool made it", got)
	}
	if cmd := getSandbox(t, ns, got).Spec.PodTemplate.Spec.Containers[0].Command; len(cmd) > 0 && cmd[len(cmd)-1] == "backdoor" {
		t.Errorf("the claim's sandbox %s runs %v", got, cmd)
	}
	if sb := getSandbox(t, ns, edited); metav1.GetControllerOf(sb) == nil || metav1.GetControllerOf(sb).Kind != "SandboxWarmPool" {
		t.Errorf("edited member %s owners %v, want still the pool's", edited, sb.OwnerReferences)
	}
}
