package v1beta1

// A pause that keeps memory (docs/snapshots.md): on gVisor the node agent saves the whole sandbox
// (its processes, their memory, open files and sockets) before the pod is deleted, and the next
// pod of the Sandbox is restored from that image on the same node. The choice is an annotation,
// not a field, so that neither version's contract changes; admission validates its values.
const (
	// PauseModeAnnotation chooses what a pause keeps: PauseModeKeepMemory, or PauseModeDelete
	// (the default: the pod is deleted and the next one starts cold). Set on the Sandbox or on
	// its pod template (a SandboxTemplate's pod template passes it on).
	PauseModeAnnotation = "agents.x-k8s.io/pause-mode"
	// PauseModeKeepMemory saves the sandbox's memory at a pause and restores it at the resume.
	PauseModeKeepMemory = "KeepMemory"
	// PauseModeDelete is today's pause: the pod goes, the next starts cold.
	PauseModeDelete = "Delete"
	// MemoryImageAnnotation is the controller's record of a kept image (JSON: node, path, bytes,
	// checkpoint seconds); it goes once the image has been used or given up.
	MemoryImageAnnotation = "agents.x-k8s.io/memory-image"
	// RestoreImageAnnotation, on a pod, names the image its sandbox is restored from. Only the
	// controller may set it (admission); containerd passes it to the runsc wrapper, which accepts
	// only an image under the node agent's directory named for the pod's Sandbox.
	RestoreImageAnnotation = "dev.agent-sandbox.restore-image"
	// ForkOfAnnotation, set when a Sandbox is created, names a running Sandbox of the same
	// namespace to fork: the controller saves that Sandbox's memory without stopping it, and this
	// Sandbox's first pod is restored from the save on the parent's node, so it starts with the
	// parent's processes and memory under its own name, address and policies. Its author must
	// hold create on the parent's sandboxes/proxy (the right to run code in it); admission
	// checks that and refuses the annotation on any later write.
	ForkOfAnnotation = "agents.x-k8s.io/fork-of"
	// SandboxConditionMemoryKept says what became of the memory of a KeepMemory pause: True once
	// saved or restored, False with the reason the Sandbox paused or resumed cold instead.
	SandboxConditionMemoryKept = "MemoryKept"
)

// Reasons of the MemoryKept condition.
const (
	ReasonMemorySaved      = "MemorySaved"
	ReasonMemoryRestored   = "MemoryRestored"
	ReasonCheckpointFailed = "CheckpointFailed"
	ReasonRestoreFailed    = "RestoreFailed"
	ReasonImageUnusable    = "ImageUnusable"
	// ReasonForkFailed: the parent could not be saved (gone, not running, not gVisor); the fork
	// started cold.
	ReasonForkFailed = "ForkFailed"
)

// KeepsMemory says whether a pause of the Sandbox saves its memory: the pause-mode annotation on
// the Sandbox, else on its pod template.
func (s *Sandbox) KeepsMemory() bool {
	if v, ok := s.Annotations[PauseModeAnnotation]; ok {
		return v == PauseModeKeepMemory
	}
	return s.Spec.PodTemplate.ObjectMeta.Annotations[PauseModeAnnotation] == PauseModeKeepMemory
}

// ForkOf is the Sandbox this one forks ("" for none).
func (s *Sandbox) ForkOf() string { return s.Annotations[ForkOfAnnotation] }
