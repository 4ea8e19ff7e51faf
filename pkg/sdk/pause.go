package sdk

import (
	"encoding/json"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// PauseOption configures Pause.
type PauseOption interface{ applyPause(*pauseConfig) }

type pauseConfig struct{ mode string }

// PauseMode is what a pause keeps: the agents.x-k8s.io/pause-mode annotation it sets on the
// Sandbox, with the pause, in one write (docs/snapshots.md).
type PauseMode string

func (m PauseMode) applyPause(c *pauseConfig) { c.mode = string(m) }

// KeepMemory pauses a gVisor sandbox with its memory: the node agent saves its processes before
// the pod goes, and the resume restores them on the same node (or starts cold, saying why in
// the Sandbox's MemoryKept condition).
const KeepMemory PauseMode = agentsv1alpha1.PauseModeKeepMemory

// DeleteOnPause is today's pause: the pod goes, the next starts cold.
const DeleteOnPause PauseMode = "Delete"

// pausePatch is the merge patch of a pause: zero replicas, and the pause mode when one is asked.
func pausePatch(opts []PauseOption) []byte {
	var pc pauseConfig
	for _, o := range opts {
		if o != nil {
			o.applyPause(&pc)
		}
	}
	patch := map[string]any{"spec": map[string]any{"replicas": agentsv1alpha1.PausedReplicas}}
	if pc.mode != "" {
		patch["metadata"] = map[string]any{"annotations": map[string]string{agentsv1alpha1.PauseModeAnnotation: pc.mode}}
	}
	data, _ := json.Marshal(patch) // plain maps of strings and ints
	return data
}
