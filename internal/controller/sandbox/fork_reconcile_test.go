package sandbox

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

const (
	parentName   = "parent"
	parentPodUID = "parent-pod-uid"
)

// aParent is a running Sandbox and its pod, ready on testNode, as the fork's parent; change
// alters them before they are stored.
func aParent(change func(sb *agentsv1beta1.Sandbox, pod *corev1.Pod)) []client.Object {
	parent := testwrap.MakeSandbox(testNS, parentName).UID("parent-uid").Generation(1).Hub()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: parentName, UID: types.UID(parentPodUID),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(parent, sandboxGVK)}},
		Spec:   corev1.PodSpec{NodeName: testNode},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: testHostIP},
	}
	if change != nil {
		change(parent, pod)
	}
	return []client.Object{parent, pod}
}

// forkRig reconciles a fork of the parent once: its first pod is made.
func forkRig(t *testing.T, agents *fakeAgents, parent []client.Object) *rig {
	t.Helper()
	return forkRigOf(t, agents, parent, aSandbox().Annotation(agentsv1beta1.ForkOfAnnotation, parentName).Hub())
}

func forkRigOf(t *testing.T, agents *fakeAgents, parent []client.Object, fork *agentsv1beta1.Sandbox) *rig {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	g := newRig(t, append([]client.Object{fork, node}, parent...), withNodeAgents(agents))
	g.reconcile()
	return g
}

// A fork's first pod restores the parent's memory: the parent's node agent saves the parent,
// left running, as the fork's own image; the pod is made on that node to restore it, and once
// it is ready the image goes and the condition says the memory came from the parent.
func TestAForksFirstPodRestoresItsRunningParentsMemory(t *testing.T) {
	agents := &fakeAgents{deleted: nodeagent.DeleteResult{Tried: true, Outcome: imagestore.Outcome{Restored: true, Seconds: 0.3}}}
	g := forkRig(t, agents, aParent(nil))

	want := "checkpoint " + testHostIP + " " + parentPodUID + " " + string(testUID) + " " + testNS + "/" + testSB
	if !slices.Equal(agents.calls, []string{want}) || !slices.Equal(agents.leftRunning, []bool{true}) {
		t.Fatalf("agent calls %q (left running %v); want [%q], the parent left running", agents.calls, agents.leftRunning, want)
	}
	pod := g.pod()
	if pod == nil || pod.Annotations[agentsv1beta1.RestoreImageAnnotation] != testImage {
		t.Fatalf("the fork's pod %v; want it to restore %s", pod, testImage)
	}
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchFields[0].Values[0] != testNode {
		t.Fatalf("the fork's pod's node affinity %+v; want it on the parent's node %s", terms, testNode)
	}
	g.wantMemoryKept(metav1.ConditionTrue, agentsv1beta1.ReasonMemorySaved, "the memory of parent was saved for this fork")

	g.podRunsReady()
	g.updateStatus(pod, func() { pod.Status.HostIP = testHostIP })
	g.reconcile()
	g.wantMemoryKept(metav1.ConditionTrue, agentsv1beta1.ReasonMemoryRestored, "forked from parent: its memory restored on node n1")
	if last := agents.calls[len(agents.calls)-1]; last != "delete "+testHostIP+" "+string(testUID) {
		t.Errorf("last agent call %q; want the fork's image deleted once its pod is ready", last)
	}
	if n := len(agents.calls); n != 2 {
		t.Errorf("agent calls %q; want one save and one delete", agents.calls)
	}
}

// A fork that cannot be saved starts cold, once: the condition says why, and no later pass
// asks a node agent again.
func TestAForkThatCannotBeSavedStartsColdAndSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name        string
		parent      []client.Object
		agents      *fakeAgents
		wantMessage string
	}{
		{name: "no such parent", parent: nil, agents: &fakeAgents{}, wantMessage: "Sandbox parent is not in namespace team-a"},
		{name: "the parent is paused", agents: &fakeAgents{},
			parent: aParent(func(sb *agentsv1beta1.Sandbox, _ *corev1.Pod) {
				sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
			}),
			wantMessage: "Sandbox parent is paused"},
		{name: "the parent's pod is not running yet", agents: &fakeAgents{},
			parent: aParent(func(_ *agentsv1beta1.Sandbox, pod *corev1.Pod) {
				pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
			}),
			wantMessage: "the pod of Sandbox parent is not running (Pending)"},
		{name: "a same-named pod the parent does not control", agents: &fakeAgents{},
			parent:      aParent(func(_ *agentsv1beta1.Sandbox, pod *corev1.Pod) { pod.OwnerReferences = nil }),
			wantMessage: "Sandbox parent has no pod"},
		{name: "the parent runs on runc", parent: aParent(nil),
			agents:      &fakeAgents{checkpointErr: imagestore.Errorf(imagestore.ReasonNotGVisor, "no hibernate socket")},
			wantMessage: "saving parent failed (NotGVisor)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := forkRig(t, tc.agents, tc.parent)
			pod := g.pod()
			if pod == nil || pod.Annotations[agentsv1beta1.RestoreImageAnnotation] != "" {
				t.Fatalf("the fork's pod %v; want one that starts cold", pod)
			}
			g.wantMemoryKept(metav1.ConditionFalse, agentsv1beta1.ReasonForkFailed, tc.wantMessage)
			calls := len(tc.agents.calls)
			g.podRunsReady()
			g.reconcile()
			g.wantMemoryKept(metav1.ConditionFalse, agentsv1beta1.ReasonForkFailed, tc.wantMessage)
			if len(tc.agents.calls) != calls {
				t.Errorf("agent calls %q after the cold start; want none more", tc.agents.calls[calls:])
			}
		})
	}
}

// A Sandbox that is not a fork never makes a node agent save anything at its start.
func TestASandboxWithoutForkOfSavesNothingAtItsStart(t *testing.T) {
	agents := &fakeAgents{}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	g := newRig(t, append([]client.Object{aSandbox().Hub(), node}, aParent(nil)...), withNodeAgents(agents))
	g.reconcile()
	if len(agents.calls) != 0 || g.condition(agentsv1beta1.SandboxConditionMemoryKept) != nil {
		t.Errorf("agent calls %q, MemoryKept %+v; want neither", agents.calls, g.condition(agentsv1beta1.SandboxConditionMemoryKept))
	}
}

// A snapshot pool's members may share a save of the prepared Sandbox made moments before for
// another member; a fork asked for directly is always saved as the parent is at that moment.
func TestOnlyASnapshotPoolsMembersShareASave(t *testing.T) {
	pool := testwrap.MakeWarmPool(testNS, "pool").Hub()
	pool.UID = "pool-uid"
	poolKind := extv1beta1.GroupVersion.WithKind("SandboxWarmPool")
	for _, tc := range []struct {
		name      string
		fork      *agentsv1beta1.Sandbox
		shared    bool
		wantShare float64
		wantSaid  string
	}{
		{name: "a fork asked for directly", fork: aSandbox().Annotation(agentsv1beta1.ForkOfAnnotation, parentName).Hub(),
			wantShare: 0, wantSaid: "in 0.20s"},
		{name: "a pool's member, saved afresh", fork: aSandbox().Annotation(agentsv1beta1.ForkOfAnnotation, parentName).ControlledBy(pool, poolKind).Hub(),
			wantShare: poolForkShareSeconds, wantSaid: "in 0.20s"},
		{name: "a pool's member, from the last member's save", fork: aSandbox().Annotation(agentsv1beta1.ForkOfAnnotation, parentName).ControlledBy(pool, poolKind).Hub(),
			shared: true, wantShare: poolForkShareSeconds, wantSaid: "shared with the forks saved just before it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agents := &fakeAgents{shared: tc.shared}
			g := forkRigOf(t, agents, aParent(nil), tc.fork)
			if len(agents.shareSeconds) != 1 || agents.shareSeconds[0] != tc.wantShare {
				t.Fatalf("share seconds asked %v; want [%v]", agents.shareSeconds, tc.wantShare)
			}
			// A new pool member's first status waits until a scheduler has seen its pod.
			pod := g.pod()
			g.updateStatus(pod, func() {
				pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
			})
			g.reconcile()
			g.wantMemoryKept(metav1.ConditionTrue, agentsv1beta1.ReasonMemorySaved, tc.wantSaid)
		})
	}
}
