package snapshotlab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
)

// criPod is the annotations containerd's CRI gives the specs of pod ns/name's sandbox and
// containers (the wrapper checks an image against the first two).
func criPod(ns, name, podUID, sandboxID string) map[string]string {
	return map[string]string{
		"io.kubernetes.cri.sandbox-namespace": ns, "io.kubernetes.cri.sandbox-name": name,
		"io.kubernetes.cri.sandbox-uid": podUID, "io.kubernetes.cri.sandbox-id": sandboxID,
		"dev.gvisor.lab.pod": podUID, // a gVisor annotation of the pod's own, as its cgroup parent is
	}
}

// useGoWrapper makes the lab's runsc the node agent's wrapper (this test binary, see TestMain).
func useGoWrapper(t *testing.T, l *Lab, images string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nLAB_RUNSC=%q LAB_AGENT_IMAGES=%q exec %q \"$@\"\n", filepath.Join(l.GVisorDir, "runsc"), images, self)
	if err := os.WriteFile(l.path("bin", "runsc"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestTheNodeAgentSavesAPodAndTheWrapperRestoresIt runs the node's side of the memory-keeping
// pause on the lab's containerd: the node agent finds a pod's sandbox by CRI's annotations and
// saves it through the shim's hibernate socket; a new pod of the same namespace and name is
// restored by the Go wrapper (its workload answers with the token it held), and a pod of another
// namespace that names the same image starts cold.
func TestTheNodeAgentSavesAPodAndTheWrapperRestoresIt(t *testing.T) {
	l := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	images := l.path("agent-images")
	useGoWrapper(t, l, images)
	agent := &nodeagent.Agent{Node: "lab", Images: imagestore.Store{Dir: images},
		Tasks: l.path("state", "io.containerd.runtime.v2.task", Namespace), ShimRoot: l.RunscRoot()}
	pause := []string{"/workload", "sleep"}
	startPod := func(id, ns, podUID, image string) {
		t.Helper()
		netns, err := l.NewNetns(id, "10.231.0."+fmt.Sprint(len(l.netns)+1)+"/24")
		if err != nil {
			t.Fatal(err)
		}
		// runsc takes any unique prefix for an ID: "work-" + id, never id + "-work".
		ann := criPod(ns, "pod", podUID, id)
		for _, c := range []Container{
			{ID: id, Name: "pause", MiB: 1, Netns: netns, Args: pause, RestoreImage: image, Annotations: ann},
			{ID: "work-" + id, Name: "work", Sandbox: id, MiB: 32, Netns: netns, RestoreImage: image, Annotations: ann},
		} {
			if err := l.Run(ctx, c); err != nil {
				t.Fatalf("starting %s: %v\nrunsc: %s", c.ID, err, l.LogTail(c.ID, "runsc.restore.log", 5))
			}
		}
	}
	startPod("pod-a", "team", "uid-a", "")
	if _, err := l.WaitProbe(ctx, "work-pod-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	before, err := l.Probe(ctx, "work-pod-a", "token-a")
	if err != nil {
		t.Fatal(err)
	}
	const sandboxUID = "0e0e0e0e-1111-2222-3333-444444444444"
	saved, err := agent.Save(ctx, nodeagent.CheckpointRequest{PodUID: "uid-a", SandboxUID: sandboxUID, Namespace: "team", PodName: "pod"})
	if err != nil {
		t.Fatalf("the agent's save: %v", err)
	}
	t.Logf("saved %d bytes in %.2fs into %s", saved.Bytes, saved.Seconds, saved.Image)
	for _, id := range []string{"work-pod-a", "pod-a"} {
		if err := l.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	// Another tenant's pod naming the image starts cold: its workload holds no token.
	startPod("pod-x", "thief", "uid-x", saved.Image)
	if got, err := l.WaitProbe(ctx, "work-pod-x", time.Minute); err != nil || got.Token != "" {
		t.Fatalf("another namespace's pod naming the image: %+v, %v; want a cold start (no token)", got, err)
	}
	startPod("pod-b", "team", "uid-b", saved.Image)
	after, err := l.WaitProbe(ctx, "work-pod-b", 30*time.Second)
	if err != nil {
		t.Fatalf("the restored pod's workload does not answer: %v", err)
	}
	if after.Token != "token-a" || !after.MemoryIntact || after.PID != before.PID {
		t.Errorf("the restored workload: token %q (want token-a), memory intact %v, pid %d (was %d)", after.Token, after.MemoryIntact, after.PID, before.PID)
	}
	res, err := agent.Delete(sandboxUID)
	if err != nil || !res.Tried || !res.Outcome.Restored || res.Outcome.SandboxID != "pod-b" {
		t.Errorf("the agent's delete: %+v, %v; want the restore by pod-b recorded", res, err)
	}
	t.Logf("restored by %s in %.2fs (runsc restore of the sandbox); counter %d before, %d after", res.Outcome.SandboxID, res.Outcome.Seconds, before.Counter, after.Counter)
}
