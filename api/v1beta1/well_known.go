package v1beta1

// Condition types a v1beta1 Sandbox reports.
const (
	// SandboxConditionReady is True when the pod runs, is Ready, has an IP (and its Service
	// exists when one is wanted).
	SandboxConditionReady = "Ready"
	// SandboxConditionSuspended reports a suspension's progress while operatingMode is Suspended.
	SandboxConditionSuspended = "Suspended"
	// SandboxConditionFinished is True once the pod reached a terminal phase.
	SandboxConditionFinished = "Finished"
	// SandboxConditionPodScheduled mirrors the pod's PodScheduled condition.
	SandboxConditionPodScheduled = "PodScheduled"
)

// Reasons of the v1beta1 Sandbox conditions.
const (
	SandboxReasonDependenciesReady        = "DependenciesReady"
	SandboxReasonDependenciesNotReady     = "DependenciesNotReady"
	SandboxReasonMultiplePods             = "MultiplePods"
	SandboxReasonSuspended                = "SandboxSuspended"
	SandboxReasonPodScheduled             = "PodScheduled"
	SandboxReasonPodSchedulingUnknown     = "PodSchedulingUnknown"
	SandboxReasonPodSucceeded             = "PodSucceeded"
	SandboxReasonPodFailed                = "PodFailed"
	SandboxReasonExpired                  = "SandboxExpired"
	SandboxReasonSuspendedPodTerminated   = "PodTerminated"
	SandboxReasonSuspendedPodTerminating  = "PodTerminating"
	SandboxReasonSuspendedPodNotOwned     = "PodNotOwned"
	SandboxReasonNotSuspended             = "NotSuspended"
	SandboxReasonSuspendedPodStateUnknown = "PodStateUnknown"
	SandboxReasonReconcilerError          = "ReconcilerError"
	// Deprecated: upstream replaced it by SandboxReasonSuspendedPodTerminating.
	SandboxReasonSuspendedPodNotTerminated = "PodNotTerminated"
)
