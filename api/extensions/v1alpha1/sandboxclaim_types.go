package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// ShutdownPolicy describes the policy for shutting down the underlying Sandbox when the
// SandboxClaim expires.
// +kubebuilder:validation:Enum=Delete;DeleteForeground;Retain
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the SandboxClaim (and cascadingly the Sandbox) when expired.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyDeleteForeground deletes the SandboxClaim when expired using foreground
	// cascade deletion: the claim stays visible until its Sandbox and Pod are gone.
	ShutdownPolicyDeleteForeground ShutdownPolicy = "DeleteForeground"
	// ShutdownPolicyRetain keeps the SandboxClaim when expired (Status will show Expired); its
	// Sandbox, Pod and Service are deleted.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// WarmPoolPolicy selects the warm pools a claim may adopt from: "none", "default" (any pool of
// the template) or the name of one pool.
type WarmPoolPolicy string

const (
	// WarmPoolPolicyNone indicates that no warm pool should be used. A fresh sandbox will always be created.
	WarmPoolPolicyNone WarmPoolPolicy = "none"
	// WarmPoolPolicyDefault selects from all available warm pools that match the template.
	WarmPoolPolicyDefault WarmPoolPolicy = "default"
)

// EnvVar represents a custom environment variable key-value pair.
type EnvVar struct {
	// name of the environment variable.
	// +required
	Name string `json:"name"`

	// value of the environment variable.
	// +required
	Value string `json:"value"`

	// containerName specifies the target container for the environment variable. If not
	// specified, it defaults to the first container defined in the template.
	// +optional
	ContainerName string `json:"containerName,omitempty"`
}

// Lifecycle defines the lifecycle management for the SandboxClaim.
type Lifecycle struct {
	// shutdownTime is the absolute time when the SandboxClaim expires. The SandboxClaim controller
	// enforces it by deleting the Sandbox resources; it is not propagated to the Sandbox. If
	// omitted, the SandboxClaim itself won't expire.
	// +kubebuilder:validation:Format="date-time"
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// ttlSecondsAfterFinished limits how long a finished claim is retained. The timer starts from
	// the mirrored Finished condition's LastTransitionTime.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// shutdownPolicy determines the behavior when the SandboxClaim expires.
	// +kubebuilder:default=Retain
	// +optional
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// SandboxTemplateRef references a SandboxTemplate.
type SandboxTemplateRef struct {
	// name of the SandboxTemplate
	// +required
	Name string `json:"name"`
}

// SandboxClaimSpec defines the desired state of SandboxClaim.
type SandboxClaimSpec struct {
	// sandboxTemplateRef defines the name of the SandboxTemplate to be used for creating a Sandbox.
	// +required
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef"`

	// lifecycle defines when and how the SandboxClaim should be shut down.
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`

	// warmpool specifies the warm pool policy for sandbox adoption:
	// "none" always creates a fresh sandbox, "default" (the default) selects from all matching
	// warm pools, and a warm pool name selects only from that pool.
	// +kubebuilder:default=default
	// +optional
	WarmPool *WarmPoolPolicy `json:"warmpool,omitempty"`

	// additionalPodMetadata defines the labels and annotations to be propagated to the Sandbox
	// Pod. Label values are limited to 63 characters and must match Kubernetes label value patterns.
	// Refused at admission, because they would let a tenant's pod pose as the router or pass the
	// selectors of this system: keys in the agents.x-k8s.io domain (and its subdomains) and the
	// router's labels (app or app.kubernetes.io/name = sandbox-router). Other bad input (keys in
	// the kubernetes.io and k8s.io domains, but app.kubernetes.io and the autoscaler's
	// safe-to-evict annotation; invalid keys or values) is reported in the Ready condition
	// (InvalidMetadata), as upstream does.
	// +kubebuilder:validation:XValidation:rule="!has(self.labels) || !self.labels.exists(k, ('.' + k).contains('.agents.x-k8s.io/'))",messageExpression="'additionalPodMetadata.labels: key ' + self.labels.filter(k, ('.' + k).contains('.agents.x-k8s.io/'))[0] + ' is in the reserved domain agents.x-k8s.io'"
	// +kubebuilder:validation:XValidation:rule="!has(self.annotations) || !self.annotations.exists(k, ('.' + k).contains('.agents.x-k8s.io/'))",messageExpression="'additionalPodMetadata.annotations: key ' + self.annotations.filter(k, ('.' + k).contains('.agents.x-k8s.io/'))[0] + ' is in the reserved domain agents.x-k8s.io'"
	// +kubebuilder:validation:XValidation:rule="!has(self.labels) || !self.labels.exists(k, (k == 'app' || k == 'app.kubernetes.io/name') && self.labels[k] == 'sandbox-router')",message="additionalPodMetadata.labels: app=sandbox-router and app.kubernetes.io/name=sandbox-router identify the sandbox router; a sandbox may not carry them"
	// +optional
	AdditionalPodMetadata agentsv1alpha1.PodMetadata `json:"additionalPodMetadata,omitempty"`

	// env is a list of environment variables to inject into the sandbox
	// +listType=atomic
	// +optional
	Env []EnvVar `json:"env,omitempty"`
}

// SandboxStatus is the claim's view of its Sandbox.
type SandboxStatus struct {
	// name is the name of the Sandbox created from this claim
	// +optional
	Name string `json:"name,omitempty"`

	// podIPs are the IP addresses of the underlying pod. A pod may have multiple IPs in
	// dual-stack clusters.
	// +listType=atomic
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`
}

// SandboxClaimStatus defines the observed state of SandboxClaim.
type SandboxClaimStatus struct {
	// conditions represent the latest available observations of a Sandbox's current state.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// sandbox defines the state of Sandbox
	// +optional
	SandboxStatus SandboxStatus `json:"sandbox,omitempty"`
}

// SandboxClaim is the Schema for the sandbox Claim API.
// +kubebuilder:object:root=true
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

	// spec defines the desired state of SandboxClaim
	// +required
	Spec SandboxClaimSpec `json:"spec"`

	// status defines the observed state of SandboxClaim
	// +optional
	Status SandboxClaimStatus `json:"status,omitempty"`
}

// SandboxClaimList contains a list of SandboxClaim.
// +kubebuilder:object:root=true
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxClaim{}, &SandboxClaimList{})
}
