package v1beta1

// Condition types of a Sandbox.
const (
	// SandboxConditionIdlePause is present when the Sandbox asks to be paused when idle
	// (IdleTimeoutAnnotation): True while the controller watches its activity, False with
	// InvalidIdleTimeout when the annotation cannot be read (nothing is paused then).
	SandboxConditionIdlePause = "IdlePause"
)

// Reasons of the Ready condition of a Sandbox. Every not-ready state has its own reason so that a
// client can tell waiting (PodPending, PodNotReady, PodNoIP) from final (Expired, PodFailed, PodSucceeded).
const (
	ReasonReady          = "DependenciesReady"
	ReasonPodPending     = "PodPending"
	ReasonPodNotReady    = "PodNotReady"
	ReasonPodNoIP        = "PodNoIP"
	ReasonPodCreating    = "PodCreating"
	ReasonPodTerminating = "PodTerminating"
	ReasonPaused         = "SandboxPaused"
	// ReasonIdlePaused: the controller paused the Sandbox after its idle timeout.
	ReasonIdlePaused = "IdlePaused"
	// ReasonIdleWatched and ReasonInvalidIdleTimeout are the IdlePause condition's reasons.
	ReasonIdleWatched        = "Watching"
	ReasonInvalidIdleTimeout = "InvalidIdleTimeout"
	ReasonExpired            = "SandboxExpired"
	ReasonPodFailed          = "PodFailed"
	ReasonPodSucceeded       = "PodSucceeded"
	ReasonPodNotOwned        = "PodNotOwned"
	ReasonReconcilerError    = "ReconcilerError"
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
	// IdleTimeoutAnnotation (a Go duration, at least 10s) asks the controller to pause the
	// Sandbox (replicas: 0, volumes and Service kept) once that long has passed with no request
	// through the router and no command running in sandboxd. Set on a Sandbox, or on the
	// SandboxTemplate or SandboxClaim it is made from.
	IdleTimeoutAnnotation = "agents.x-k8s.io/idle-timeout"
	// WakeOnRequestAnnotation, "true" or "false", says whether a request through the router
	// resumes the Sandbox while it is paused. Default: true when IdleTimeoutAnnotation is set,
	// false otherwise.
	WakeOnRequestAnnotation = "agents.x-k8s.io/wake-on-request"
	// IdlePausedAnnotation is when the controller paused the Sandbox for being idle (RFC 3339);
	// it tells "paused (idle)" from "paused (by you)" and goes when the Sandbox runs again.
	IdlePausedAnnotation = "agents.x-k8s.io/idle-paused-at"
	// SessionEnvAnnotation holds, as a JSON object of names to values, the env of the
	// SandboxClaim that took this Sandbox warm. Its pod was started without it; the router hands
	// it to sandboxd with every request, and sandboxd gives it to every process it starts. Set
	// only by the controller (the ownership admission policy), in the adoption's one write.
	SessionEnvAnnotation = "agents.x-k8s.io/session-env"
	// RouterPodLabel=RouterPodLabelValue (app=sandbox-router) is on every sandbox router pod of
	// the standard install: the controller's --router-pod-labels default, which the default
	// NetworkPolicy of every Sandbox admits ingress from. A sandbox pod may never carry it.
	RouterPodLabel = "app"
	// RouterPodLabelValue is the value of RouterPodLabel.
	RouterPodLabelValue = "sandbox-router"
)

// IdleAnnotations are the annotations of the idle pause that a SandboxTemplate or SandboxClaim
// passes on to its Sandboxes.
var IdleAnnotations = []string{IdleTimeoutAnnotation, WakeOnRequestAnnotation}

// Sandbox replicas bounds: v1alpha1's spec.replicas, which operatingMode expresses here.
const (
	PausedReplicas  int32 = 0
	RunningReplicas int32 = 1
)

// DesiredReplicas returns the replica count operatingMode asks for: 0 when Suspended, else 1
// (Running, the default).
func (s *Sandbox) DesiredReplicas() int32 {
	if s.Spec.OperatingMode == SandboxOperatingModeSuspended {
		return PausedReplicas
	}
	return RunningReplicas
}

// OperatingModeFor is the operatingMode that asks for replicas (0: Suspended, else Running).
func OperatingModeFor(replicas int32) SandboxOperatingMode {
	if replicas == PausedReplicas {
		return SandboxOperatingModeSuspended
	}
	return SandboxOperatingModeRunning
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

// PristineGeneration is a Sandbox's metadata.generation until its spec is first changed: a warm
// pool member still at it is exactly what its pool made.
const PristineGeneration int64 = 1
