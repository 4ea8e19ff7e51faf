package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxOperatingMode is the state the user wants a Sandbox in (intent, not observation:
// the Ready and Suspended conditions report what actually happened).
// +kubebuilder:validation:Enum=Running;Suspended
type SandboxOperatingMode string

const (
	// SandboxOperatingModeRunning asks for a backing pod (and Service, when requested).
	SandboxOperatingModeRunning SandboxOperatingMode = "Running"
	// SandboxOperatingModeSuspended asks for the pod to be removed while the Sandbox object
	// and its volumes are kept, so that it can be resumed.
	SandboxOperatingModeSuspended SandboxOperatingMode = "Suspended"
)

// ShutdownPolicy says what happens to the Sandbox object when it expires.
// +kubebuilder:validation:Enum=Delete;Retain
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the Sandbox once it expired.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyRetain keeps the expired Sandbox, with Ready=False reason SandboxExpired.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// Lifecycle is when and how a Sandbox shuts down.
type Lifecycle struct {
	// shutdownTime is when the Sandbox expires: its pod and Service are removed then, and
	// shutdownPolicy decides about the object itself. Unset means it never expires.
	// +kubebuilder:validation:Format="date-time"
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// shutdownPolicy decides whether the expired Sandbox object is kept (Retain, the default)
	// or deleted (Delete). Its pod and Service go either way.
	// +kubebuilder:default=Retain
	// +optional
	ShutdownPolicy *ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// SandboxSpec is the desired state of a Sandbox.
// +kubebuilder:validation:XValidation:rule="has(self.volumeClaimTemplates) == has(oldSelf.volumeClaimTemplates) && (!has(self.volumeClaimTemplates) || self.volumeClaimTemplates == oldSelf.volumeClaimTemplates)",message="volumeClaimTemplates is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas)",message="spec.replicas is a v1alpha1 field and v1beta1 has none: set spec.operatingMode to Suspended (pause) or Running (resume), e.g. kubectl patch sandbox <name> --type merge -p '{\"spec\":{\"operatingMode\":\"Suspended\"}}', or keep v1alpha1 explicitly: kubectl scale sandboxes.v1alpha1.agents.x-k8s.io <name> --replicas=0"
type SandboxSpec struct {
	SandboxBlueprint `json:",inline"`

	// +optional
	Lifecycle `json:",inline"`

	// operatingMode is Running (the default: keep a pod) or Suspended (remove the pod, keep
	// the Sandbox and its volumes).
	// +kubebuilder:default=Running
	// +optional
	OperatingMode SandboxOperatingMode `json:"operatingMode,omitempty"`

	// replicas is v1alpha1's pause switch, in this version's schema only to be refused: a
	// v1alpha1 habit (the harness flow's `kubectl patch ... replicas: 0`) sent to the preferred version
	// would otherwise be pruned with a warning, and nothing would pause.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
}

// SandboxStatus is the observed state of a Sandbox.
type SandboxStatus struct {
	// serviceFQDN is the DNS name of the sandbox's Service (cluster domain from the
	// controller's --cluster-domain flag).
	// +optional
	ServiceFQDN string `json:"serviceFQDN,omitempty"`

	// service is the name of the sandbox's headless Service, empty when there is none.
	// +optional
	Service string `json:"service,omitempty"`

	// conditions of the Sandbox (Ready, Suspended, Finished, PodScheduled).
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// replicas is 1 while the sandbox has a pod, else 0. Not in upstream's v1beta1: it is
	// v1alpha1's status.replicas (the scale subresource's status path there), kept here because
	// this is the stored version and the controller writes it through /status.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// selector is the label selector of the sandbox's pod.
	// +optional
	LabelSelector string `json:"selector,omitempty"`

	// podIPs are the IPs of the pod (two in dual-stack clusters); empty while there is no pod.
	// +listType=atomic
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`

	// nodeName is the node the pod is scheduled to; empty while there is no pod.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
}

// Sandbox is an isolated, stateful pod for one agent session.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sbx;sandbox
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sandbox struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the Sandbox.
	// +required
	Spec SandboxSpec `json:"spec"`

	// status is the observed state of the Sandbox.
	// +optional
	Status SandboxStatus `json:"status,omitempty"`
}

// SandboxList is a list of Sandboxes.
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Sandbox{}, &SandboxList{})
}
