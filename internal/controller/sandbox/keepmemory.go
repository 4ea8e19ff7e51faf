package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
)

// The memory-keeping pause (docs/snapshots.md): a KeepMemory Sandbox on gVisor is saved by the
// node agent of its pod's node before the pod is deleted; its next pod is made on that node with
// the restore annotation, and once it is ready the image is deleted and the MemoryKept condition
// says whether the memory came back or the pod started cold, and why.

// NodeAgents reach the node agent of a node by the node's address.
type NodeAgents interface {
	Checkpoint(ctx context.Context, hostIP string, req nodeagent.CheckpointRequest) (nodeagent.CheckpointResult, error)
	Delete(ctx context.Context, hostIP, sandboxUID string) (nodeagent.DeleteResult, error)
}

// memoryImage is the MemoryImageAnnotation: where a Sandbox's memory was saved.
type memoryImage struct {
	Node              string  `json:"node"`
	HostIP            string  `json:"hostIP"`
	Image             string  `json:"image"`
	Bytes             int64   `json:"bytes"`
	CheckpointSeconds float64 `json:"checkpointSeconds"`
	// PodUID is the pod saved; RestorePodUID the pod made to restore it, once made.
	PodUID string `json:"podUID"`
	// ForkOf is the parent Sandbox whose running pod was saved, for a fork; Shared, that the
	// image is a save made for an earlier fork (a snapshot pool's).
	ForkOf        string `json:"forkOf,omitempty"`
	Shared        bool   `json:"shared,omitempty"`
	RestorePodUID string `json:"restorePodUID,omitempty"`
	// Done is what became of the restore, once the image is deleted. It stays in the record
	// (until the next pause writes a new one) so that every pass says it in MemoryKept: the pass
	// that learned it may lose its status write, and the node agent cannot be asked twice.
	Done *restoreDone `json:"done,omitempty"`
}

// restoreDone is the MemoryKept condition a finished restore left.
type restoreDone struct {
	Restored bool   `json:"restored"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
}

func imageOf(sb *agentsv1beta1.Sandbox) *memoryImage {
	raw, ok := sb.Annotations[agentsv1beta1.MemoryImageAnnotation]
	if !ok {
		return nil
	}
	img := &memoryImage{}
	if json.Unmarshal([]byte(raw), img) != nil {
		return &memoryImage{} // unreadable: given up at the resume
	}
	return img
}

// setMemoryImage writes (img) or removes (nil) the record on the Sandbox's metadata, on a copy,
// so that sb's status as this reconcile computes it is not replaced by the server's.
func (r *Reconciler) setMemoryImage(ctx context.Context, sb *agentsv1beta1.Sandbox, img *memoryImage) error {
	updated := sb.DeepCopy()
	if img == nil {
		delete(updated.Annotations, agentsv1beta1.MemoryImageAnnotation)
	} else {
		raw, err := json.Marshal(img)
		if err != nil {
			return err
		}
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[agentsv1beta1.MemoryImageAnnotation] = string(raw)
	}
	if err := r.client.Patch(ctx, updated, client.MergeFrom(sb), agentsv1beta1.FieldOwner); err != nil {
		return err
	}
	sb.Annotations, sb.ResourceVersion = updated.Annotations, updated.ResourceVersion
	return nil
}

func setMemoryCondition(sb *agentsv1beta1.Sandbox, ok bool, reason, format string, args ...any) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{
		Type: agentsv1beta1.SandboxConditionMemoryKept, Status: status, Reason: reason,
		Message: fmt.Sprintf(format, args...), ObservedGeneration: sb.Generation,
	})
}

// saveMemory checkpoints a KeepMemory Sandbox's pod before the pause deletes it. It never stops
// the pause: a failure is said in the MemoryKept condition and the pod goes as today.
func (r *Reconciler) saveMemory(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) error {
	if r.nodeAgents == nil || !sb.KeepsMemory() {
		return nil
	}
	if img := imageOf(sb); img != nil && img.PodUID == string(pod.UID) {
		return nil // saved already; the pod's deletion did not go through last time
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Status.HostIP == "" {
		setMemoryCondition(sb, false, agentsv1beta1.ReasonCheckpointFailed, "the pod was not running (%s); paused without its memory", pod.Status.Phase)
		return nil
	}
	res, err := r.nodeAgents.Checkpoint(ctx, pod.Status.HostIP, nodeagent.CheckpointRequest{
		PodUID: string(pod.UID), SandboxUID: string(sb.UID), Namespace: pod.Namespace, PodName: pod.Name,
	})
	if err != nil {
		log.FromContext(ctx).Info("checkpoint failed; pausing without memory", "pod", klog.KObj(pod), "err", err)
		setMemoryCondition(sb, false, agentsv1beta1.ReasonCheckpointFailed, "paused without its memory (%s): %v", imagestore.ReasonOf(err), err)
		return nil
	}
	checkpointSeconds.Observe(res.Seconds)
	checkpointBytes.Observe(float64(res.Bytes))
	img := &memoryImage{Node: pod.Spec.NodeName, HostIP: pod.Status.HostIP, Image: res.Image, Bytes: res.Bytes,
		CheckpointSeconds: res.Seconds, PodUID: string(pod.UID)}
	if err := r.setMemoryImage(ctx, sb, img); err != nil {
		return fmt.Errorf("recording the memory image: %w", err)
	}
	saidSaved(sb)
	log.FromContext(ctx).V(2).Info("memory saved", "pod", klog.KObj(pod), "node", img.Node, "bytes", img.Bytes, "seconds", img.CheckpointSeconds)
	return nil
}

// saidSaved sets MemoryKept=True/MemorySaved while the Sandbox's record names an image not yet
// restored. It is said from the record on every paused reconcile, not only by the one that
// saved: that one's status write may fail after the pod is gone, and no later pass would
// checkpoint again to say it.
func saidSaved(sb *agentsv1beta1.Sandbox) {
	img := imageOf(sb)
	if img == nil || img.Image == "" || img.RestorePodUID != "" {
		return
	}
	setMemoryCondition(sb, true, agentsv1beta1.ReasonMemorySaved, "memory saved on node %s: %d bytes in %.2fs", img.Node, img.Bytes, img.CheckpointSeconds)
}

// restoreInto makes the new pod restore the saved memory: on the image's node, with the restore
// annotation. When that cannot be, the image is given up and the pod starts cold.
func (r *Reconciler) restoreInto(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) error {
	img := imageOf(sb)
	if img == nil || img.Done != nil || r.nodeAgents == nil {
		return nil // nothing to restore: a restore done already leaves a later pod cold
	}
	why := ""
	switch {
	case img.RestorePodUID != "":
		why = fmt.Sprintf("pod %s was made to restore it and went before it was ready", img.RestorePodUID)
	case img.Image == "" || filepath.Base(img.Image) != string(sb.UID):
		why = "the record of the image is not this Sandbox's"
	default:
		err := r.apiReader.Get(ctx, client.ObjectKey{Name: img.Node}, &corev1.Node{})
		if apierrors.IsNotFound(err) {
			why = fmt.Sprintf("node %s is gone", img.Node)
		} else if err != nil {
			return fmt.Errorf("reading node %s: %w", img.Node, err)
		}
	}
	if why != "" {
		return r.giveUpImage(ctx, sb, img, imagestore.ReasonNoImage, why)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[agentsv1beta1.RestoreImageAnnotation] = img.Image
	pinToNode(&pod.Spec, img.Node)
	return nil
}

// pinToNode adds "on this node" to every required node selector term (terms are ORed, so each
// must carry it), or makes the one term.
func pinToNode(spec *corev1.PodSpec, node string) {
	req := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := &na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(*terms) == 0 {
		*terms = append(*terms, corev1.NodeSelectorTerm{})
	}
	for i := range *terms {
		(*terms)[i].MatchFields = append((*terms)[i].MatchFields, req)
	}
}

// restorePodMade records the pod made to restore, so that its loss is not followed by a second try.
func (r *Reconciler) restorePodMade(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) error {
	img := imageOf(sb)
	if img == nil || pod.Annotations[agentsv1beta1.RestoreImageAnnotation] == "" {
		return nil
	}
	img.RestorePodUID = string(pod.UID)
	return r.setMemoryImage(ctx, sb, img)
}

// finishRestore runs once the restoring pod is ready: the node agent deletes the image and says
// whether the wrapper restored it or started the pod cold.
func (r *Reconciler) finishRestore(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) error {
	img := imageOf(sb)
	if img != nil && img.Done != nil {
		setMemoryCondition(sb, img.Done.Restored, img.Done.Reason, "%s", img.Done.Message)
		return nil
	}
	if img == nil || r.nodeAgents == nil || pod.Annotations[agentsv1beta1.RestoreImageAnnotation] == "" || !podReady(pod) {
		return nil
	}
	res, err := r.nodeAgents.Delete(ctx, pod.Status.HostIP, string(sb.UID))
	if err != nil {
		return fmt.Errorf("deleting the memory image on node %s: %w", img.Node, err)
	}
	done := &restoreDone{Reason: agentsv1beta1.ReasonRestoreFailed,
		Message: "resumed cold: the node's runtime did not restore the image (not gVisor, or no restoring runsc)"}
	switch out := res.Outcome; {
	case res.Tried && out.Restored:
		restoreSeconds.Observe(out.Seconds)
		restoreBytes.Observe(float64(img.Bytes))
		done = &restoreDone{Restored: true, Reason: agentsv1beta1.ReasonMemoryRestored,
			Message: fmt.Sprintf("memory restored on node %s from %d bytes in %.2fs", img.Node, img.Bytes, out.Seconds)}
		if img.ForkOf != "" {
			done.Message = fmt.Sprintf("forked from %s: its %s", img.ForkOf, done.Message)
		}
	case res.Tried:
		done.Message = fmt.Sprintf("resumed cold: the restore on node %s failed (%s): %s", img.Node, out.Reason, out.Message)
	}
	img.Done = done
	if err := r.setMemoryImage(ctx, sb, img); err != nil {
		return err
	}
	setMemoryCondition(sb, done.Restored, done.Reason, "%s", done.Message)
	log.FromContext(ctx).V(2).Info("restore finished", "pod", klog.KObj(pod), "restored", res.Outcome.Restored, "reason", res.Outcome.Reason)
	return nil
}

// giveUpImage deletes an image that will not be used (best effort: the node agent also deletes
// the images of deleted Sandboxes) and says so.
func (r *Reconciler) giveUpImage(ctx context.Context, sb *agentsv1beta1.Sandbox, img *memoryImage, reason, why string) error {
	if img.HostIP != "" && filepath.Base(img.Image) == string(sb.UID) {
		delCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := r.nodeAgents.Delete(delCtx, img.HostIP, string(sb.UID))
		cancel()
		if err != nil {
			log.FromContext(ctx).Info("could not delete a memory image given up", "node", img.Node, "err", err)
		}
	}
	if err := r.setMemoryImage(ctx, sb, nil); err != nil {
		return err
	}
	setMemoryCondition(sb, false, agentsv1beta1.ReasonImageUnusable, "resumed cold (%s): %s", reason, why)
	return nil
}
