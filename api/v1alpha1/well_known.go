package v1alpha1

// The names of the contract have one source, v1beta1 (the hub and storage version), where
// each is documented; these are the same constants under the v1alpha1 package.

import agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"

// Condition types of a Sandbox.
const (
	// SandboxConditionReady is True when the pod runs, is Ready and has IPs.
	SandboxConditionReady = "Ready"
	// SandboxConditionFinished is True once the pod has run to completion (Succeeded or Failed).
	SandboxConditionFinished  = "Finished"
	SandboxConditionIdlePause = agentsv1beta1.SandboxConditionIdlePause
	// SandboxConditionMemoryKept: what became of the memory of a KeepMemory pause or a fork.
	SandboxConditionMemoryKept = agentsv1beta1.SandboxConditionMemoryKept
)

// Reasons of the MemoryKept condition.
const (
	ReasonMemorySaved    = agentsv1beta1.ReasonMemorySaved
	ReasonMemoryRestored = agentsv1beta1.ReasonMemoryRestored
	ReasonForkFailed     = agentsv1beta1.ReasonForkFailed
)

// Reasons of the Ready condition of a Sandbox. Every not-ready state has its own reason so that a
// client can tell waiting (PodPending, PodNotReady, PodNoIP) from final (Expired, PodFailed, PodSucceeded).
const (
	ReasonReady              = agentsv1beta1.ReasonReady
	ReasonPodPending         = agentsv1beta1.ReasonPodPending
	ReasonPodNotReady        = agentsv1beta1.ReasonPodNotReady
	ReasonPodNoIP            = agentsv1beta1.ReasonPodNoIP
	ReasonPodCreating        = agentsv1beta1.ReasonPodCreating
	ReasonPodTerminating     = agentsv1beta1.ReasonPodTerminating
	ReasonPaused             = agentsv1beta1.ReasonPaused
	ReasonIdlePaused         = agentsv1beta1.ReasonIdlePaused
	ReasonIdleWatched        = agentsv1beta1.ReasonIdleWatched
	ReasonInvalidIdleTimeout = agentsv1beta1.ReasonInvalidIdleTimeout
	ReasonExpired            = agentsv1beta1.ReasonExpired
	ReasonPodFailed          = agentsv1beta1.ReasonPodFailed
	ReasonPodSucceeded       = agentsv1beta1.ReasonPodSucceeded
	ReasonPodNotOwned        = agentsv1beta1.ReasonPodNotOwned
	ReasonReconcilerError    = agentsv1beta1.ReasonReconcilerError
)

// Event reasons of a Sandbox.
const (
	EventRouterLabelsRefused = agentsv1beta1.EventRouterLabelsRefused
)

// Label and annotation keys.
const (
	SandboxNameHashLabel    = agentsv1beta1.SandboxNameHashLabel
	SandboxNameLabel        = agentsv1beta1.SandboxNameLabel
	SandboxPodLabel         = agentsv1beta1.SandboxPodLabel
	SandboxPodLabelValue    = agentsv1beta1.SandboxPodLabelValue
	IdleTimeoutAnnotation   = agentsv1beta1.IdleTimeoutAnnotation
	WakeOnRequestAnnotation = agentsv1beta1.WakeOnRequestAnnotation
	IdlePausedAnnotation    = agentsv1beta1.IdlePausedAnnotation
	SessionEnvAnnotation    = agentsv1beta1.SessionEnvAnnotation
	PauseModeAnnotation     = agentsv1beta1.PauseModeAnnotation
	PauseModeKeepMemory     = agentsv1beta1.PauseModeKeepMemory
	MemoryImageAnnotation   = agentsv1beta1.MemoryImageAnnotation
	RestoreImageAnnotation  = agentsv1beta1.RestoreImageAnnotation
	ForkOfAnnotation        = agentsv1beta1.ForkOfAnnotation
	RouterPodLabel          = agentsv1beta1.RouterPodLabel
	RouterPodLabelValue     = agentsv1beta1.RouterPodLabelValue
)

// IdleAnnotations are the annotations of the idle pause that a SandboxTemplate or SandboxClaim
// passes on to its Sandboxes.
var IdleAnnotations = []string{IdleTimeoutAnnotation, WakeOnRequestAnnotation}

// Sandbox replicas bounds.
const (
	PausedReplicas  = agentsv1beta1.PausedReplicas
	RunningReplicas = agentsv1beta1.RunningReplicas
)

// DesiredReplicas returns spec.replicas with its default (1) applied.
func (s *Sandbox) DesiredReplicas() int32 {
	if s.Spec.Replicas == nil {
		return RunningReplicas
	}
	return *s.Spec.Replicas
}

// WakesOnRequest says whether a request through the router resumes the Sandbox while it is
// paused: the wake-on-request annotation when set, else whether it pauses itself when idle.
func (s *Sandbox) WakesOnRequest() bool {
	switch s.Annotations[WakeOnRequestAnnotation] {
	case "true":
		return true
	case "false":
		return false
	}
	_, set := s.Annotations[IdleTimeoutAnnotation]
	return set
}

// EffectiveShutdownPolicy returns spec.shutdownPolicy with its default (Retain) applied.
func (s *Sandbox) EffectiveShutdownPolicy() ShutdownPolicy {
	if s.Spec.ShutdownPolicy == nil {
		return ShutdownPolicyRetain
	}
	return *s.Spec.ShutdownPolicy
}

const PristineGeneration = agentsv1beta1.PristineGeneration
