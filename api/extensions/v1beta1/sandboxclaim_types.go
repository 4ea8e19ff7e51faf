package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// ShutdownPolicy says what happens to a SandboxClaim (and its Sandbox) when it expires.
// +kubebuilder:validation:Enum=Delete;DeleteForeground;Retain
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the expired claim; its Sandbox goes by cascade.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyDeleteForeground deletes the expired claim with foreground cascading, so the
	// claim stays visible until its Sandbox and pod are gone.
	ShutdownPolicyDeleteForeground ShutdownPolicy = "DeleteForeground"
	// ShutdownPolicyRetain keeps the expired claim (Ready=False, ClaimExpired) and deletes its
	// Sandbox, pod and Service.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// Lifecycle is when and how a SandboxClaim shuts down.
type Lifecycle struct {
	// shutdownTime is when the claim expires; the claim controller then removes the Sandbox's
	// resources. It is not copied to the Sandbox. Unset means the claim never expires.
	// +kubebuilder:validation:Format="date-time"
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// ttlSecondsAfterFinished bounds how long a finished claim is kept, counted from its
	// Finished condition's lastTransitionTime.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// shutdownPolicy decides what expiry does to the claim.
	// +kubebuilder:default=Retain
	// +optional
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// SandboxWarmPoolRef names a SandboxWarmPool.
type SandboxWarmPoolRef struct {
	// name of the SandboxWarmPool.
	// +required
	Name string `json:"name"`
}

// EnvVar is an environment variable a claim injects into its sandbox.
type EnvVar struct {
	// name of the variable.
	// +required
	Name string `json:"name"`

	// value of the variable.
	// +required
	Value string `json:"value"`

	// containerName is the container to set it in; the template's first container when empty.
	// +optional
	ContainerName string `json:"containerName,omitempty"`
}

// SandboxClaimSpec is the desired state of a SandboxClaim.
type SandboxClaimSpec struct {
	// warmPoolRef is the warm pool to take a sandbox from; the pool's template makes a fresh
	// one when the pool has none ready.
	// +required
	WarmPoolRef SandboxWarmPoolRef `json:"warmPoolRef"`

	// lifecycle is when and how the claim shuts down.
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`

	// additionalPodMetadata are labels and annotations added to the sandbox's pod. Label values
	// are limited to 63 characters and must be valid label values. Keys in the agents.x-k8s.io
	// domain and the router's labels are refused at admission, other bad input is reported in the
	// Ready condition (InvalidMetadata), as in v1alpha1 (docs/security.md).
	// +kubebuilder:validation:XValidation:rule="!has(self.labels) || !self.labels.exists(k, ('.' + k).contains('.agents.x-k8s.io/'))",messageExpression="'additionalPodMetadata.labels: key ' + self.labels.filter(k, ('.' + k).contains('.agents.x-k8s.io/'))[0] + ' is in the reserved domain agents.x-k8s.io'"
	// +kubebuilder:validation:XValidation:rule="!has(self.annotations) || !self.annotations.exists(k, ('.' + k).contains('.agents.x-k8s.io/'))",messageExpression="'additionalPodMetadata.annotations: key ' + self.annotations.filter(k, ('.' + k).contains('.agents.x-k8s.io/'))[0] + ' is in the reserved domain agents.x-k8s.io'"
	// +kubebuilder:validation:XValidation:rule="!has(self.labels) || !self.labels.exists(k, (k == 'app' || k == 'app.kubernetes.io/name') && self.labels[k] == 'sandbox-router')",message="additionalPodMetadata.labels: app=sandbox-router and app.kubernetes.io/name=sandbox-router identify the sandbox router; a sandbox may not carry them"
	// +optional
	AdditionalPodMetadata agentsv1beta1.PodMetadata `json:"additionalPodMetadata,omitempty"`

	// env are environment variables injected into the sandbox; a claim that sets any is always
	// served by a fresh (cold) sandbox made from the pool's template.
	// +listType=atomic
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	// volumeClaimTemplates are extra PVCs made for the sandbox; setting any forces a cold start.
	// +listType=atomic
	// +optional
	VolumeClaimTemplates []agentsv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
}

// SandboxStatus is a claim's view of its Sandbox.
type SandboxStatus struct {
	// name of the Sandbox serving this claim.
	// +optional
	Name string `json:"name,omitempty"`

	// podIPs of the Sandbox's pod, mirrored from the Sandbox; empty while it has no pod.
	// +listType=atomic
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`
}

// SandboxClaimStatus is the observed state of a SandboxClaim.
type SandboxClaimStatus struct {
	// conditions of the claim (Ready, Finished).
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// sandbox is the state of the claim's Sandbox.
	// +optional
	SandboxStatus SandboxStatus `json:"sandbox,omitempty"`
}

// SandboxClaim asks for a sandbox from a warm pool.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sbxc;sandboxclaim
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Sandbox",type=string,JSONPath=`.status.sandbox.name`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxClaim struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the claim.
	// +required
	Spec SandboxClaimSpec `json:"spec"`

	// status is the observed state of the claim.
	// +optional
	Status SandboxClaimStatus `json:"status,omitempty"`
}

// SandboxClaimList is a list of SandboxClaims.
// +kubebuilder:object:root=true
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxClaim{}, &SandboxClaimList{})
}
