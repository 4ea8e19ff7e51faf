package sandbox

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
)

const (
	testNode   = "n1"
	testHostIP = "192.0.2.1"
	testImage  = "/var/lib/agent-sandbox/images/" + string(testUID)
)

// fakeAgents is the node agents: their answers, and the calls they got.
type fakeAgents struct {
	checkpointErr error
	deleted       nodeagent.DeleteResult
	calls         []string
	leftRunning   []bool    // per checkpoint
	shareSeconds  []float64 // per checkpoint
	shared        bool      // the agent answers that the image is a shared save
}

func (f *fakeAgents) Checkpoint(_ context.Context, hostIP string, req nodeagent.CheckpointRequest) (nodeagent.CheckpointResult, error) {
	f.calls = append(f.calls, "checkpoint "+hostIP+" "+req.PodUID+" "+req.SandboxUID+" "+req.Namespace+"/"+req.PodName)
	f.leftRunning = append(f.leftRunning, req.LeaveRunning)
	f.shareSeconds = append(f.shareSeconds, req.ShareSeconds)
	if f.checkpointErr != nil {
		return nodeagent.CheckpointResult{}, f.checkpointErr
	}
	return nodeagent.CheckpointResult{Node: testNode, Image: testImage, Bytes: 64 << 20, Seconds: 0.2, Shared: f.shared}, nil
}

func (f *fakeAgents) Delete(_ context.Context, hostIP, sandboxUID string) (nodeagent.DeleteResult, error) {
	f.calls = append(f.calls, "delete "+hostIP+" "+sandboxUID)
	return f.deleted, nil
}

func withNodeAgents(a NodeAgents) rigOption { return func(o *Options) { o.NodeAgents = a } }

// keepMemoryRig runs a KeepMemory Sandbox's pod on node n1, ready.
func keepMemoryRig(t *testing.T, agents *fakeAgents, mode string) *rig {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	g := newRig(t, []client.Object{aSandbox().Annotation(agentsv1beta1.PauseModeAnnotation, mode).Hub(), node}, withNodeAgents(agents))
	g.reconcile()
	pod := g.pod()
	g.update(pod, func() { pod.Spec.NodeName = testNode })
	g.podRunsReady()
	g.updateStatus(pod, func() { pod.Status.HostIP = testHostIP })
	g.reconcile()
	return g
}

func (g *rig) setMode(mode agentsv1beta1.SandboxOperatingMode) {
	sb := g.sandbox()
	g.update(sb, func() { sb.Spec.OperatingMode = mode })
	g.reconcile()
	g.reconcile() // brought by the pod's deletion or creation
}

func (g *rig) wantMemoryKept(status metav1.ConditionStatus, reason, inMessage string) {
	g.t.Helper()
	c := g.condition(agentsv1beta1.SandboxConditionMemoryKept)
	if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, inMessage) {
		g.t.Fatalf("MemoryKept = %+v; want %s/%s saying %q", c, status, reason, inMessage)
	}
}

// A pause saves the pod through its node's agent before deleting it; the resume makes the pod
// on that node with the image to restore, and once it is ready the image goes and the condition
// says the memory came back.
func TestAKeepMemoryPauseSavesThePodAndTheResumeRestoresIt(t *testing.T) {
	agents := &fakeAgents{deleted: nodeagent.DeleteResult{Tried: true, Outcome: imagestore.Outcome{Restored: true, Seconds: 0.4}}}
	g := keepMemoryRig(t, agents, agentsv1beta1.PauseModeKeepMemory)
	podUID := string(g.pod().UID)

	g.setMode(agentsv1beta1.SandboxOperatingModeSuspended)
	if want := "checkpoint " + testHostIP + " " + podUID + " " + string(testUID) + " " + testNS + "/" + testSB; len(agents.calls) != 1 || agents.calls[0] != want {
		t.Fatalf("agent calls %q; want [%q]", agents.calls, want)
	}
	if g.pod() != nil {
		t.Fatal("the pod of a paused Sandbox still exists after its save")
	}
	g.wantMemoryKept(metav1.ConditionTrue, agentsv1beta1.ReasonMemorySaved, "memory saved on node n1")
	if rec := g.sandbox().Annotations[agentsv1beta1.MemoryImageAnnotation]; !strings.Contains(rec, testImage) {
		t.Fatalf("memory-image record %q; want the image %s", rec, testImage)
	}

	g.setMode(agentsv1beta1.SandboxOperatingModeRunning)
	pod := g.pod()
	if pod == nil || pod.Annotations[agentsv1beta1.RestoreImageAnnotation] != testImage {
		t.Fatalf("the resumed pod %v; want it to restore %s", pod, testImage)
	}
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchFields) != 1 || terms[0].MatchFields[0].Values[0] != testNode {
		t.Fatalf("the resumed pod's node affinity %+v; want it on %s", terms, testNode)
	}
	g.podRunsReady()
	g.updateStatus(pod, func() { pod.Status.HostIP = testHostIP })
	g.reconcile()
	if last := agents.calls[len(agents.calls)-1]; last != "delete "+testHostIP+" "+string(testUID) {
		t.Fatalf("last agent call %q; want the image deleted once the pod is ready", last)
	}
	g.wantMemoryKept(metav1.ConditionTrue, agentsv1beta1.ReasonMemoryRestored, "memory restored on node n1")
	if img := imageOf(g.sandbox()); img == nil || img.Done == nil || !img.Done.Restored {
		t.Errorf("the memory-image record after the restore %+v; want it done, restored", img)
	}
}

// The pass that finished the restore may lose its status write; the node agent has deleted the
// image and cannot be asked again, so the next passes say the outcome from the record.
func TestARestoresOutcomeIsSaidEvenWhenItsPassLostItsStatus(t *testing.T) {
	agents := &fakeAgents{deleted: nodeagent.DeleteResult{Tried: true, Outcome: imagestore.Outcome{Restored: true, Seconds: 0.4}}}
	g := keepMemoryRig(t, agents, agentsv1beta1.PauseModeKeepMemory)
	g.setMode(agentsv1beta1.SandboxOperatingModeSuspended)
	g.setMode(agentsv1beta1.SandboxOperatingModeRunning)
	pod := g.pod()
	g.podRunsReady()
	g.updateStatus(pod, func() { pod.Status.HostIP = testHostIP })
	g.refuse("status", "Sandbox", conflict("Sandbox"))
	if _, err := g.reconcileErr(); err == nil {
		t.Fatal("the finishing pass reported no error; want its status write's conflict")
	}
	g.heal()
	calls := len(agents.calls)
	g.reconcile()
	g.wantMemoryKept(metav1.ConditionTrue, agentsv1beta1.ReasonMemoryRestored, "memory restored on node n1")
	if len(agents.calls) != calls {
		t.Errorf("agent calls %q after the lost status; want none more", agents.calls[calls:])
	}
}

// The pass that saved the memory may lose its status write after the pod is gone; no later pass
// saves again, so the condition is said from the Sandbox's record of the image.
func TestASavedMemoryIsSaidEvenWhenTheSavingPassLostItsStatus(t *testing.T) {
	agents := &fakeAgents{}
	g := keepMemoryRig(t, agents, agentsv1beta1.PauseModeKeepMemory)
	sb := g.sandbox()
	g.update(sb, func() { sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	g.refuse("status", "Sandbox", conflict("Sandbox"))
	if _, err := g.reconcileErr(); err == nil {
		t.Fatal("the saving pass reported no error; want its status write's conflict")
	}
	g.heal()
	if c := g.condition(agentsv1beta1.SandboxConditionMemoryKept); c != nil && c.Reason == agentsv1beta1.ReasonMemorySaved {
		t.Fatalf("MemoryKept = %+v before the next pass; the refused status write should not have landed", c)
	}
	g.reconcile() // brought by the pod's deletion
	g.wantMemoryKept(metav1.ConditionTrue, agentsv1beta1.ReasonMemorySaved, "memory saved on node n1")
	if len(agents.calls) != 1 {
		t.Errorf("agent calls %q; want the one checkpoint", agents.calls)
	}
}

// Every way the memory cannot be kept ends in today's pause or a cold resume, and the condition
// says which and why.
func TestWhenTheMemoryCannotBeKeptThePauseAndResumeGoOnAsToday(t *testing.T) {
	for _, tc := range []struct {
		name         string
		agents       *fakeAgents
		beforeResume func(g *rig)
		wantRestore  bool
		wantReason   string
		wantMessage  string
	}{
		{name: "the pod is not on gVisor", agents: &fakeAgents{checkpointErr: imagestore.Errorf(imagestore.ReasonNotGVisor, "no hibernate socket")},
			wantReason: agentsv1beta1.ReasonCheckpointFailed, wantMessage: "paused without its memory (NotGVisor)"},
		{name: "the node's disk is full", agents: &fakeAgents{checkpointErr: imagestore.Errorf(imagestore.ReasonNoSpace, "no space left on device")},
			wantReason: agentsv1beta1.ReasonCheckpointFailed, wantMessage: "(NoSpace)"},
		{name: "the image's node is gone", agents: &fakeAgents{},
			beforeResume: func(g *rig) {
				if err := g.api.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}); err != nil {
					g.t.Fatal(err)
				}
			},
			wantReason: agentsv1beta1.ReasonImageUnusable, wantMessage: "node n1 is gone"},
		{name: "the wrapper refused the image", wantRestore: true,
			agents:     &fakeAgents{deleted: nodeagent.DeleteResult{Tried: true, Outcome: imagestore.Outcome{Reason: imagestore.ReasonCorrupt, Message: "pages.img has 5 bytes"}}},
			wantReason: agentsv1beta1.ReasonRestoreFailed, wantMessage: "resumed cold: the restore on node n1 failed (ImageCorrupt): pages.img has 5 bytes"},
		{name: "the node's runtime never used the image", wantRestore: true, agents: &fakeAgents{},
			wantReason: agentsv1beta1.ReasonRestoreFailed, wantMessage: "did not restore the image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := keepMemoryRig(t, tc.agents, agentsv1beta1.PauseModeKeepMemory)
			g.setMode(agentsv1beta1.SandboxOperatingModeSuspended)
			if g.pod() != nil {
				t.Fatal("the pod of a paused Sandbox still exists")
			}
			if tc.beforeResume != nil {
				tc.beforeResume(g)
			}
			g.setMode(agentsv1beta1.SandboxOperatingModeRunning)
			pod := g.pod()
			if pod == nil || (pod.Annotations[agentsv1beta1.RestoreImageAnnotation] != "") != tc.wantRestore {
				t.Fatalf("the resumed pod %v; want one, restoring: %t", pod, tc.wantRestore)
			}
			g.podRunsReady()
			g.updateStatus(pod, func() { pod.Status.HostIP = testHostIP })
			g.reconcile()
			g.wantMemoryKept(metav1.ConditionFalse, tc.wantReason, tc.wantMessage)
			if img := imageOf(g.sandbox()); img != nil && img.Done == nil {
				t.Errorf("the memory-image record %+v still names an image to restore; want none, or the restore done", img)
			}
		})
	}
}

// Without the annotation (or with Delete) the node agent is never asked.
func TestOnlyKeepMemorySandboxesAreSaved(t *testing.T) {
	for _, mode := range []string{"", agentsv1beta1.PauseModeDelete} {
		agents := &fakeAgents{}
		g := keepMemoryRig(t, agents, mode)
		g.setMode(agentsv1beta1.SandboxOperatingModeSuspended)
		if len(agents.calls) != 0 || g.condition(agentsv1beta1.SandboxConditionMemoryKept) != nil {
			t.Errorf("pause mode %q: agent calls %q, MemoryKept %+v; want neither", mode, agents.calls, g.condition(agentsv1beta1.SandboxConditionMemoryKept))
		}
	}
}
