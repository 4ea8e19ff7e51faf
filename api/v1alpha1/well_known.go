package v1alpha1

// Condition types of a Sandbox.
const (
	// SandboxConditionReady is True when the pod runs, is Ready and has IPs.
	SandboxConditionReady = "Ready"
	// SandboxConditionFinished is True once the pod has run to completion (Succeeded or Failed).
	SandboxConditionFinished = "Finished"
)

// Reasons of the Ready condition of a Sandbox. Every not-ready state has its own reason so that a
// client can tell waiting (PodPending, PodNotReady, PodNoIP) from final (Expired, PodFailed, PodSucceeded).
const (
	ReasonReady           = "DependenciesReady"
	ReasonPodPending      = "PodPending"
	ReasonPodNotReady     = "PodNotReady"
	ReasonPodNoIP         = "PodNoIP"
	ReasonPodCreating     = "PodCreating"
	ReasonPodTerminating  = "PodTerminating"
	ReasonPaused          = "SandboxPaused"
	ReasonExpired         = "SandboxExpired"
	ReasonPodFailed       = "PodFailed"
	ReasonPodSucceeded    = "PodSucceeded"
	ReasonPodNotOwned     = "PodNotOwned"
	ReasonReconcilerError = "ReconcilerError"
)

// Event reasons of a Sandbox.
const (
	// EventRouterLabelsRefused: the pod template carries labels of the sandbox router's pods,
	// which the controller does not put on a sandbox pod (they would let it pass the router's
	// NetworkPolicy peer rules).
	EventRouterLabelsRefused = "RouterLabelsRefused"
)

// Label and annotation keys.
const (
	// SandboxNameHashLabel tracks the objects a Sandbox owns; the headless Service selects its pod by it.
	SandboxNameHashLabel = "agents.x-k8s.io/sandbox-name-hash"
	// SandboxNameLabel carries the Sandbox name on its pod (when it fits a label value) for humans and routers.
	SandboxNameLabel = "agents.x-k8s.io/sandbox-name"
	// SandboxPodLabel is on every sandbox pod (raw, template or pool), set only by the controller,
	// so that a cluster's own NetworkPolicies can select all sandbox pods at once.
	SandboxPodLabel = "agents.x-k8s.io/sandbox"
	// SandboxPodLabelValue is the value of SandboxPodLabel.
	SandboxPodLabelValue = "true"
	// SessionEnvAnnotation holds, as a JSON object of names to values, the env of the
	// SandboxClaim that took this Sandbox warm. Its pod was started without it; the router hands
	// it to sandboxd with every request, and sandboxd gives it to every process it starts. Set
	// only by the controller (the ownership admission policy), in the adoption's one write.
	SessionEnvAnnotation = "agents.x-k8s.io/session-env"
)

// Sandbox replicas bounds.
const (
	PausedReplicas  int32 = 0
	RunningReplicas int32 = 1
)

// DesiredReplicas returns spec.replicas with its default (1) applied.
func (s *Sandbox) DesiredReplicas() int32 {
	if s.Spec.Replicas == nil {
		return RunningReplicas
	}
	return *s.Spec.Replicas
}

// EffectiveShutdownPolicy returns spec.shutdownPolicy with its default (Retain) applied.
func (s *Sandbox) EffectiveShutdownPolicy() ShutdownPolicy {
	if s.Spec.ShutdownPolicy == nil {
		return ShutdownPolicyRetain
	}
	return *s.Spec.ShutdownPolicy
}
