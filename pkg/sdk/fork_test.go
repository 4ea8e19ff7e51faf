package sdk

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

// A fork carries its parent's pod template and volumes, names its parent, and leaves out what
// only the controller writes (admission would refuse it) and the parent's lifecycle.
func TestAForkCopiesThePodTemplateButNothingOnlyTheControllerWrites(t *testing.T) {
	parent := testwrap.MakeSandbox("ns", "agent").Image("runtime").Replicas(1).
		Annotation(agentsv1alpha1.PauseModeAnnotation, "KeepMemory").
		Annotation(agentsv1alpha1.MemoryImageAnnotation, `{"node":"n1"}`).Obj()
	parent.Spec.PodTemplate.Metadata.Labels = map[string]string{"app": "agent", "agents.x-k8s.io/template": "t"}
	parent.Spec.PodTemplate.Metadata.Annotations = map[string]string{"note": "kept",
		agentsv1alpha1.RestoreImageAnnotation: "/images/x", agentsv1alpha1.PauseModeAnnotation: "KeepMemory"}
	child := forkOf(parent)

	if child.GenerateName != "agent-fork-" || child.Name != "" || child.Namespace != "ns" {
		t.Errorf("the fork's name %q/%q%q; want generated from agent-fork- in ns", child.Namespace, child.Name, child.GenerateName)
	}
	wantAnnotations := map[string]string{agentsv1alpha1.ForkOfAnnotation: "agent", agentsv1alpha1.PauseModeAnnotation: "KeepMemory"}
	if !maps.Equal(child.Annotations, wantAnnotations) {
		t.Errorf("the fork's annotations %v; want %v (no memory-image record)", child.Annotations, wantAnnotations)
	}
	if got := child.Spec.PodTemplate.Metadata.Labels; !maps.Equal(got, map[string]string{"app": "agent"}) {
		t.Errorf("the fork's pod labels %v; want the parent's less the controller's", got)
	}
	if got := child.Spec.PodTemplate.Metadata.Annotations; !maps.Equal(got, map[string]string{"note": "kept", agentsv1alpha1.PauseModeAnnotation: "KeepMemory"}) {
		t.Errorf("the fork's pod annotations %v; want the parent's less the restore image", got)
	}
	if child.Spec.PodTemplate.Spec.Containers[0].Image != "runtime" || child.Spec.Replicas != nil {
		t.Errorf("the fork's spec %+v; want the parent's containers and no replicas of its own", child.Spec)
	}
	parent.Spec.PodTemplate.Spec.Containers[0].Image = "changed"
	if child.Spec.PodTemplate.Spec.Containers[0].Image != "runtime" {
		t.Error("the fork shares its pod template with the parent; want a copy")
	}
}

// Fork makes n ready children of a running sandbox; one that the controller did not restore
// from its parent is still returned, with ErrForkedCold.
func TestForkMakesReadyChildrenAndSaysWhichStartedCold(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	sdktest.StartController(t, c.KubeClient(), c.Namespace())
	if _, err := c.CreateSandbox(ctx, testwrap.MakeSandbox("", "agent").Image("runtime").Obj()); err != nil {
		t.Fatal(err)
	}
	forks, err := c.Fork(ctx, "agent", 3, WithLabels(map[string]string{"run": "r1"}))
	if !errors.Is(err, ErrForkedCold) || !strings.Contains(err.Error(), "is the node agent installed?") {
		t.Errorf("Fork without a node agent: %v; want ErrForkedCold saying why", err)
	}
	if len(forks) != 3 {
		t.Fatalf("Fork returned %d sandboxes; want 3", len(forks))
	}
	for _, f := range forks {
		sb := &agentsv1alpha1.Sandbox{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace(), Name: f.Name()}, sb); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(sb.Name, "agent-fork-") || sb.Annotations[agentsv1alpha1.ForkOfAnnotation] != "agent" || sb.Labels["run"] != "r1" {
			t.Errorf("fork %s: annotations %v, labels %v; want a fork of agent labelled run=r1", sb.Name, sb.Annotations, sb.Labels)
		}
		if !f.Status().Ready {
			t.Errorf("fork %s returned before it was ready", f.Name())
		}
	}
}

// A fork that cannot be asked for writes nothing.
func TestForkRefusesWhatItCannotDo(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	sdktest.StartController(t, c.KubeClient(), c.Namespace())
	if _, err := c.CreateSandbox(ctx, testwrap.MakeSandbox("", "asleep").Image("runtime").Obj()); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(ctx, "asleep"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, parent string
		n            int
		want         string
	}{
		{"no forks", "asleep", 0, "0 forks; ask for 1 to 32"},
		{"too many forks", "asleep", 33, "33 forks; ask for 1 to 32"},
		{"no such parent", "nobody", 1, "not found"},
		{"a paused parent", "asleep", 1, "it is paused; only a running sandbox is forked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Fork(ctx, tc.parent, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Fork(%s, %d) = %v; want an error saying %q", tc.parent, tc.n, err, tc.want)
			}
		})
	}
	var list agentsv1alpha1.SandboxList
	if err := env.Client.List(ctx, &list, client.InNamespace(c.Namespace())); err != nil || len(list.Items) != 1 {
		t.Errorf("Sandboxes after the refused forks: %d (%v); want only the parent", len(list.Items), err)
	}
}
