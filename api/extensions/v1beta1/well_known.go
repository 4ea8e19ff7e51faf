package v1beta1

// Condition reasons and keys of the v1beta1 extension kinds.
const (
	// ClaimExpiredReason is the Ready=False reason of an expired claim.
	ClaimExpiredReason = "ClaimExpired"
	// AssignedSandboxNameAnnotation names the Sandbox a claim adopted.
	AssignedSandboxNameAnnotation = "agents.x-k8s.io/sandbox-name"
	// SandboxIDLabel carries the owning claim's UID on a claimed sandbox and its pod.
	SandboxIDLabel = "agents.x-k8s.io/claim-uid"
	// WarmPoolRefField indexes claims by the pool they name.
	WarmPoolRefField = ".spec.warmPoolRef.name"
	// TemplateRefField indexes pools by the template they name.
	TemplateRefField = ".spec.sandboxTemplateRef.name"
)
