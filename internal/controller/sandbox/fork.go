package sandbox

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
)

// A fork (docs/snapshots.md, "Fork"): a Sandbox created with agents.x-k8s.io/fork-of names a
// running Sandbox of its namespace. Before the fork's first pod, the node agent of the parent's
// node saves the parent, left running, as the fork's own image; the record it leaves makes
// restoreInto pin that pod to the node and restore it, exactly as a memory-keeping resume does,
// and finishRestore says in MemoryKept whether the memory came. A fork that cannot be saved
// starts cold and says why (ForkFailed).

// saveParent makes a fork's image before its first pod. It runs once per fork: the record, or
// the MemoryKept condition it leaves, marks it done.
func (r *Reconciler) saveParent(ctx context.Context, sb *agentsv1beta1.Sandbox) error {
	parentName := sb.ForkOf()
	if parentName == "" || r.nodeAgents == nil || imageOf(sb) != nil ||
		meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionMemoryKept) != nil {
		return nil
	}
	parentPod, why, err := r.runningParentPod(ctx, sb, parentName)
	if err != nil {
		return err
	}
	if why != "" {
		return r.forkFailed(ctx, sb, "%s", why)
	}
	res, err := r.nodeAgents.Checkpoint(ctx, parentPod.Status.HostIP, nodeagent.CheckpointRequest{
		PodUID: string(parentPod.UID), SandboxUID: string(sb.UID), Namespace: sb.Namespace, PodName: sb.Name,
		LeaveRunning: true, ShareSeconds: shareSeconds(sb),
	})
	if err != nil {
		return r.forkFailed(ctx, sb, "saving %s failed (%s): %v", parentName, imagestore.ReasonOf(err), err)
	}
	if !res.Shared {
		checkpointSeconds.Observe(res.Seconds)
		checkpointBytes.Observe(float64(res.Bytes))
	}
	img := &memoryImage{Node: parentPod.Spec.NodeName, HostIP: parentPod.Status.HostIP, Image: res.Image, Bytes: res.Bytes,
		CheckpointSeconds: res.Seconds, PodUID: string(parentPod.UID), ForkOf: parentName, Shared: res.Shared}
	if err := r.setMemoryImage(ctx, sb, img); err != nil {
		return fmt.Errorf("recording the fork's image: %w", err)
	}
	saidForkSaved(sb)
	log.FromContext(ctx).V(2).Info("fork saved", "parent", klog.KObj(parentPod), "node", img.Node, "bytes", img.Bytes, "seconds", img.CheckpointSeconds)
	return nil
}

// poolForkShareSeconds is how long a snapshot pool's members share one save of the prepared
// Sandbox: a pool fills and refills in bursts, and one save per burst stops the prepared
// sandbox once and keeps its memory on the node's disk once. A Fork the SDK asks for shares
// nothing: each child starts from the parent as it is at that child's save.
const poolForkShareSeconds = 60

func shareSeconds(sb *agentsv1beta1.Sandbox) float64 {
	if ref := metav1.GetControllerOf(sb); ref != nil && ref.Kind == "SandboxWarmPool" {
		return poolForkShareSeconds
	}
	return 0
}

// saidForkSaved sets MemoryKept=True/MemorySaved while a fork's record names an image not yet
// restored. It is said from the record on every pass until the restore is done, not only by
// the pass that saved: that one's status write may be lost, or skipped (a new pool member's
// first status waits for a scheduler to see its pod).
func saidForkSaved(sb *agentsv1beta1.Sandbox) {
	img := imageOf(sb)
	if img == nil || img.ForkOf == "" || img.Image == "" || img.Done != nil {
		return
	}
	saved := fmt.Sprintf("in %.2fs", img.CheckpointSeconds)
	if img.Shared {
		saved = "shared with the forks saved just before it"
	}
	setMemoryCondition(sb, true, agentsv1beta1.ReasonMemorySaved, "the memory of %s was saved for this fork on node %s: %d bytes, %s",
		img.ForkOf, img.Node, img.Bytes, saved)
}

// runningParentPod is the parent's running pod on gVisor's node, or why there is none to save.
func (r *Reconciler) runningParentPod(ctx context.Context, sb *agentsv1beta1.Sandbox, parentName string) (*corev1.Pod, string, error) {
	if parentName == sb.Name {
		return nil, "a Sandbox cannot fork itself", nil
	}
	parent := &agentsv1beta1.Sandbox{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: parentName}, parent)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("Sandbox %s is not in namespace %s", parentName, sb.Namespace), nil
	case err != nil:
		return nil, "", fmt.Errorf("reading the parent %s: %w", parentName, err)
	case !parent.DeletionTimestamp.IsZero():
		return nil, fmt.Sprintf("Sandbox %s is being deleted", parentName), nil
	case parent.DesiredReplicas() == agentsv1beta1.PausedReplicas:
		return nil, fmt.Sprintf("Sandbox %s is paused: only a running Sandbox is forked", parentName), nil
	}
	pod := &corev1.Pod{}
	err = r.client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: parentName}, pod)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(pod, parent)):
		return nil, fmt.Sprintf("Sandbox %s has no pod", parentName), nil
	case err != nil:
		return nil, "", fmt.Errorf("reading the parent's pod %s: %w", parentName, err)
	case pod.Status.Phase != corev1.PodRunning || pod.Status.HostIP == "" || !pod.DeletionTimestamp.IsZero():
		return nil, fmt.Sprintf("the pod of Sandbox %s is not running (%s)", parentName, pod.Status.Phase), nil
	}
	return pod, "", nil
}

// forkFailed leaves the record of a fork that starts cold, so that no later pass tries again,
// and says why.
func (r *Reconciler) forkFailed(ctx context.Context, sb *agentsv1beta1.Sandbox, format string, args ...any) error {
	msg := "forked cold, without memory: " + fmt.Sprintf(format, args...)
	done := &restoreDone{Reason: agentsv1beta1.ReasonForkFailed, Message: msg}
	if err := r.setMemoryImage(ctx, sb, &memoryImage{ForkOf: sb.ForkOf(), Done: done}); err != nil {
		return fmt.Errorf("recording a failed fork: %w", err)
	}
	setMemoryCondition(sb, false, done.Reason, "%s", msg)
	log.FromContext(ctx).Info("fork starts cold", "reason", msg)
	return nil
}
