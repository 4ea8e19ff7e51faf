package snapshotlab

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/hibernate"
)

// TestPodCheckpointRestore does what a pod on gVisor needs: a sandbox whose root is a pause
// container and whose workload is a second container in it, checkpointed through the root's shim
// and restored as a new pair (the root restored first, then the workload container). Each pod's
// specs carry a gVisor annotation of their own, as the shim's dev.gvisor.spec.cgroup-parent names
// a Kubernetes pod's UID: runsc's default validation refuses the workload's restore for it.
func TestPodCheckpointRestore(t *testing.T) {
	l := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pause := []string{"/workload", "sleep"}
	nsA, err := l.NewNetns("pod-a", "10.231.0.1/24")
	if err != nil {
		t.Fatal(err)
	}
	nsB, err := l.NewNetns("pod-b", "10.231.0.2/24")
	if err != nil {
		t.Fatal(err)
	}
	start := func(root, work Container) {
		t.Helper()
		for _, c := range []Container{root, work} {
			if err := l.Run(ctx, c); err != nil {
				t.Fatalf("starting %s: %v\nrunsc: %s", c.ID, err, l.LogTail(c.ID, "runsc.restore.log", 5))
			}
		}
	}
	podA, podB := map[string]string{"dev.gvisor.lab.pod": "a"}, map[string]string{"dev.gvisor.lab.pod": "b"}
	start(Container{ID: "pod-a", Name: "pause", MiB: 1, Netns: nsA, Args: pause, Annotations: podA},
		Container{ID: "work-a", Name: "work", Sandbox: "pod-a", MiB: 32, Netns: nsA, Annotations: podA})
	if _, err := l.WaitProbe(ctx, "work-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	before, err := l.Probe(ctx, "work-a", "token-pod")
	if err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(l.ImagesDir(), "pod")
	if err := os.MkdirAll(image, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := hibernate.Checkpoint(ctx, hibernate.Socket(l.RunscRoot(), "pod-a"), "pod-a", hibernate.CheckpointOptions{ImagePath: image}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"work-a", "pod-a"} {
		if err := l.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	start(Container{ID: "pod-b", Name: "pause", MiB: 1, Netns: nsB, Args: pause, RestoreImage: image, Annotations: podB},
		Container{ID: "work-b", Name: "work", Sandbox: "pod-b", MiB: 32, Netns: nsB, RestoreImage: image, Annotations: podB})
	after, err := l.WaitProbe(ctx, "work-b", 30*time.Second)
	if err != nil {
		t.Fatalf("the restored pod's workload does not answer: %v", err)
	}
	t.Logf("before: %+v\nafter:  %+v", before, after)
	if after.Token != "token-pod" || !after.MemoryIntact || after.PID != before.PID {
		t.Errorf("the restored workload lost its state: token %q (want token-pod), memory intact %v, pid %d (was %d)",
			after.Token, after.MemoryIntact, after.PID, before.PID)
	}
}
