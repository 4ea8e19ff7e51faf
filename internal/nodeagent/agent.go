// Package nodeagent is the node agent of the memory-keeping pause (docs/snapshots.md): on each
// node it saves a pod's gVisor sandbox through the runsc shim's hibernate service into an image
// named by the pod's Sandbox UID, deletes images, and cleans up after failed restores. Only the
// controller may call it (server.go). The runsc wrapper (restorewrap) restores from its images.
package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/hibernate"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
)

// maxSocketPath is the longest path a Unix socket may have (sun_path less its NUL).
const maxSocketPath = 107

// CheckpointRequest names the pod to save and the Sandbox whose image it becomes: the pod's own
// (a pause), or a fork's child, whose namespace and pod name the image then carries.
type CheckpointRequest struct {
	PodUID     string `json:"podUID"`
	SandboxUID string `json:"sandboxUID"`
	Namespace  string `json:"namespace"`
	PodName    string `json:"podName"`
	// LeaveRunning keeps the pod's sandbox running once saved: a fork's parent carries on.
	LeaveRunning bool `json:"leaveRunning,omitempty"`
	// ShareSeconds, for a fork, lets this image come from a save of the same sandbox made at
	// most that long ago for another fork, and keeps this save that long for the next ones (a
	// snapshot pool's members: one save, hard-linked into each member's image).
	ShareSeconds float64 `json:"shareSeconds,omitempty"`
}

// CheckpointResult is the saved image.
type CheckpointResult struct {
	Node    string  `json:"node"`
	Image   string  `json:"image"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// Shared: the image is a save made for an earlier fork (Seconds is 0: nothing was saved).
	Shared bool `json:"shared,omitempty"`
}

// DeleteRequest names the Sandbox whose image goes.
type DeleteRequest struct {
	SandboxUID string `json:"sandboxUID"`
}

// DeleteResult is what became of the image's restore before it was deleted (Tried false: none).
type DeleteResult struct {
	Tried   bool               `json:"tried"`
	Outcome imagestore.Outcome `json:"outcome"`
}

// Agent does the node's work; its fields are the node's paths.
type Agent struct {
	Node   string
	Images imagestore.Store
	// Tasks is containerd's folder of task bundles in the CRI namespace
	// (<containerd state>/io.containerd.runtime.v2.task/k8s.io): one per container, pods'
	// sandboxes among them, each with its OCI spec.
	Tasks string
	// ShimRoot is the runsc root of the shim's own config, where each pod's shim serves its
	// hibernate socket.
	ShimRoot string
	// Checkpoint saves sandbox id through the shim's socket (default hibernate's).
	Checkpoint func(ctx context.Context, socket, id string, opts hibernate.CheckpointOptions) error
	Procs      Processes
	Now        func() time.Time
	Log        *slog.Logger

	// saving holds one lock per pod sandbox: the forks of one parent are saved one at a time.
	saving sync.Map
	// once fills the defaults before the first call: the server's calls run concurrently.
	once sync.Once
}

func (a *Agent) defaults() { a.once.Do(a.fillDefaults) }

func (a *Agent) fillDefaults() {
	if a.Checkpoint == nil {
		a.Checkpoint = hibernate.Checkpoint
	}
	if a.Procs == nil {
		a.Procs = HostProcesses{}
	}
	if a.Now == nil {
		a.Now = time.Now
	}
	if a.Log == nil {
		a.Log = slog.New(slog.DiscardHandler)
	}
}

// Save checkpoints the pod's sandbox into the Sandbox's image. The sandbox stops once saved,
// unless the request leaves it running (a fork). Each way it can fail has its reason: no sandbox
// of the pod here, not gVisor, a full disk.
func (a *Agent) Save(ctx context.Context, req CheckpointRequest) (CheckpointResult, error) {
	a.defaults()
	id, err := a.podSandbox(req.PodUID)
	if err != nil {
		return CheckpointResult{}, err
	}
	socket := hibernate.Socket(a.ShimRoot, id)
	if len(socket) > maxSocketPath {
		return CheckpointResult{}, imagestore.Errorf(imagestore.ReasonFailed,
			"the hibernate socket %s is longer than a Unix socket path may be (%d bytes): the shim cannot serve it; give its config.toml a shorter root", socket, maxSocketPath)
	}
	if _, err := os.Stat(socket); err != nil {
		return CheckpointResult{}, imagestore.Errorf(imagestore.ReasonNotGVisor,
			"pod %s's sandbox %s has no hibernate socket %s: it does not run on gVisor's shim with the hibernate server", req.PodUID, id, socket)
	}
	dir, err := a.Images.Prepare(imagestore.Owner{SandboxUID: req.SandboxUID, Namespace: req.Namespace, PodName: req.PodName, PodUID: req.PodUID})
	if err != nil {
		return CheckpointResult{}, err
	}
	lock, _ := a.saving.LoadOrStore(id, &sync.Mutex{})
	lock.(*sync.Mutex).Lock()
	defer lock.(*sync.Mutex).Unlock()
	share := req.LeaveRunning && req.ShareSeconds > 0
	if share {
		if res, ok := a.linkShared(req, id, dir); ok {
			return res, nil
		}
	}
	start := a.Now()
	if err := a.Checkpoint(ctx, socket, id, hibernate.CheckpointOptions{ImagePath: dir, LeaveRunning: req.LeaveRunning}); err != nil {
		_ = a.Images.Delete(req.SandboxUID)
		if imagestore.IsNoSpace(err) {
			return CheckpointResult{}, imagestore.Errorf(imagestore.ReasonNoSpace, "checkpoint of pod %s: %v", req.PodUID, err)
		}
		return CheckpointResult{}, imagestore.Errorf(imagestore.ReasonFailed, "checkpoint of pod %s: %v", req.PodUID, err)
	}
	seconds := a.Now().Sub(start).Seconds()
	size, err := a.Images.Seal(req.SandboxUID, a.Now())
	if err != nil {
		_ = a.Images.Delete(req.SandboxUID)
		return CheckpointResult{}, err
	}
	a.Log.Info("saved a sandbox", "pod", req.Namespace+"/"+req.PodName, "sandbox", id, "image", dir, "bytes", size, "seconds", seconds, "leftRunning", req.LeaveRunning)
	if share {
		until := a.Now().Add(time.Duration(req.ShareSeconds * float64(time.Second)))
		if err := a.Images.ShareSave(id, req.SandboxUID, until); err != nil {
			a.Log.Warn("keeping a save for the next forks", "sandbox", id, "err", err) // the next fork saves again
		}
	}
	return CheckpointResult{Node: a.Node, Image: dir, Bytes: size, Seconds: seconds}, nil
}

// linkShared makes the fork's image from a recent save of the same sandbox, when there is one.
// Anything in the way (none, expired, removed meanwhile) leaves a fresh save to the caller.
func (a *Agent) linkShared(req CheckpointRequest, id, dir string) (CheckpointResult, bool) {
	size, ok, err := a.Images.LinkShared(id, req.SandboxUID, a.Now())
	if ok {
		a.Log.Info("a fork shares a save", "pod", req.Namespace+"/"+req.PodName, "sandbox", id, "image", dir, "bytes", size)
		return CheckpointResult{Node: a.Node, Image: dir, Bytes: size, Shared: true}, true
	}
	if err != nil {
		a.Log.Warn("linking a shared save; saving afresh", "sandbox", id, "err", err)
		if _, err := a.Images.Prepare(imagestore.Owner{SandboxUID: req.SandboxUID, Namespace: req.Namespace, PodName: req.PodName, PodUID: req.PodUID}); err != nil {
			a.Log.Warn("emptying the fork's image folder", "sandbox", id, "err", err)
		}
	}
	return CheckpointResult{}, false
}

// podSandbox finds the CRI pod sandbox (its pause container, the runsc sandbox's root) of a pod
// by the annotations containerd's CRI put in its spec.
func (a *Agent) podSandbox(podUID string) (string, error) {
	entries, err := os.ReadDir(a.Tasks)
	if err != nil {
		return "", fmt.Errorf("reading containerd's tasks: %w", err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(a.Tasks, e.Name(), "config.json"))
		if err != nil {
			continue
		}
		var spec struct {
			Annotations map[string]string `json:"annotations"`
		}
		if json.Unmarshal(data, &spec) != nil {
			continue
		}
		if spec.Annotations["io.kubernetes.cri.container-type"] == "sandbox" && spec.Annotations["io.kubernetes.cri.sandbox-uid"] == podUID {
			return e.Name(), nil
		}
	}
	return "", imagestore.Errorf(imagestore.ReasonNoSandbox, "no sandbox of pod %s runs on node %s", podUID, a.Node)
}

// Delete removes a Sandbox's image, first ending what a failed restore from it left running,
// and says what became of its restore.
func (a *Agent) Delete(uid string) (DeleteResult, error) {
	a.defaults()
	out, tried, err := a.Images.Outcome(uid)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		a.Log.Warn("reading a restore's outcome", "sandboxUID", uid, "err", err)
	}
	if tried {
		a.cleanUpFailed(uid, out)
	}
	if err := a.Images.Delete(uid); err != nil {
		return DeleteResult{}, err
	}
	a.Log.Info("deleted an image", "sandboxUID", uid, "restoreTried", tried, "restored", out.Restored)
	return DeleteResult{Tried: tried, Outcome: out}, nil
}

// cleanUpFailed kills the shim and runsc processes of a failed restore: until they are gone
// containerd cannot delete its task, and the pod's next sandbox cannot start.
func (a *Agent) cleanUpFailed(uid string, out imagestore.Outcome) {
	if out.Restored || out.ShimPID == 0 {
		return
	}
	killed := a.Procs.KillSandbox(out.SandboxID, out.ShimPID)
	a.Log.Info("cleaned up a failed restore", "sandboxUID", uid, "sandbox", out.SandboxID, "killed", killed)
	out.ShimPID = 0
	if err := a.Images.SetOutcome(uid, out); err != nil {
		a.Log.Warn("recording the cleanup of a failed restore", "sandboxUID", uid, "err", err)
	}
}

// Exists says whether the Sandbox an image was saved for still exists (with that UID).
type Exists func(ctx context.Context, namespace, name, uid string) (bool, error)

// Sweep cleans up failed restores and deletes the images of Sandboxes that are gone: the
// controller deletes an image after its resume, and this catches the Sandboxes deleted while
// paused.
func (a *Agent) Sweep(ctx context.Context, exists Exists) {
	a.defaults()
	if n, err := a.Images.ExpireShared(a.Now()); err != nil || n > 0 {
		a.Log.Info("expired shared saves", "count", n, "err", err)
	}
	uids, err := a.Images.List()
	if err != nil {
		a.Log.Warn("listing images", "err", err)
	}
	for _, uid := range uids {
		if out, tried, err := a.Images.Outcome(uid); err == nil && tried {
			a.cleanUpFailed(uid, out)
		}
		o, err := a.Images.Owner(uid)
		if err != nil || len(o.Files) == 0 {
			continue // being written, or not ours to judge
		}
		ok, err := exists(ctx, o.Namespace, o.PodName, uid)
		if err != nil || ok {
			continue
		}
		if _, err := a.Delete(uid); err != nil {
			a.Log.Warn("deleting the image of a deleted Sandbox", "sandboxUID", uid, "err", err)
		}
	}
}
