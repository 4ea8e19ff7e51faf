package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxWarmPoolUpdateStrategyType enumerates the update strategies of a SandboxWarmPool.
// +kubebuilder:validation:Enum=Recreate;OnReplenish
type SandboxWarmPoolUpdateStrategyType string

const (
	// RecreateSandboxWarmPoolUpdateStrategyType deletes stale unclaimed members at once so the
	// pool only holds fresh ones. Only PodTemplate spec changes make a member stale.
	RecreateSandboxWarmPoolUpdateStrategyType SandboxWarmPoolUpdateStrategyType = "Recreate"
	// OnReplenishSandboxWarmPoolUpdateStrategyType replaces stale members only when they are
	// deleted or adopted by claims.
	OnReplenishSandboxWarmPoolUpdateStrategyType SandboxWarmPoolUpdateStrategyType = "OnReplenish"
)

// SandboxWarmPoolUpdateStrategy defines the update strategy for the SandboxWarmPool.
type SandboxWarmPoolUpdateStrategy struct {
	// type indicates the type of the SandboxWarmPoolUpdateStrategy. Default is OnReplenish.
	// +kubebuilder:default=OnReplenish
	// +optional
	Type SandboxWarmPoolUpdateStrategyType `json:"type,omitempty"`
}

// SandboxWarmPoolSpec defines the desired state of SandboxWarmPool.
type SandboxWarmPoolSpec struct {
	// replicas is the desired number of sandboxes in the pool. This field is controlled by an HPA
	// if specified.
	// +kubebuilder:validation:Minimum=0
	// +required
	Replicas int32 `json:"replicas"`

	// sandboxTemplateRef is the name of the SandboxTemplate used to create the pool's sandboxes.
	// +required
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef"`

	// updateStrategy is the strategy for updating the pool's sandboxes when sandboxTemplateRef
	// or the underlying template changes.
	// +optional
	UpdateStrategy SandboxWarmPoolUpdateStrategy `json:"updateStrategy,omitempty"`

	// autoscaling sizes the pool from the claim rate; the pool controller then writes
	// spec.replicas itself, and no HPA may target the pool as well. Absent: spec.replicas is
	// left to its writer (a person, an HPA through the scale subresource).
	// +optional
	Autoscaling *SandboxWarmPoolAutoscaling `json:"autoscaling,omitempty"`
}

// SandboxWarmPoolStatus defines the observed state of SandboxWarmPool.
type SandboxWarmPoolStatus struct {
	// replicas is the total number of sandboxes in the pool.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the total number of sandboxes in the pool that are in a ready state.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// selector is the label selector used to find the pods in the pool.
	// +optional
	Selector string `json:"selector,omitempty"`

	// observedGeneration is the pool generation the controller last acted on.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are the pool's observations: Ready says whether every member is ready and, if
	// not, why (Filling, MembersUnschedulable, TemplateNotFound).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// autoscaling is what the autoscaler last saw and decided; set only with spec.autoscaling.
	// +optional
	Autoscaling *SandboxWarmPoolAutoscalingStatus `json:"autoscaling,omitempty"`
}

// SandboxWarmPool is the Schema for the sandboxwarmpools API.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=swp
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxWarmPool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec defines the desired state of SandboxWarmPool
	// +required
	Spec SandboxWarmPoolSpec `json:"spec"`

	// status defines the observed state of SandboxWarmPool
	// +optional
	Status SandboxWarmPoolStatus `json:"status,omitempty"`
}

// SandboxWarmPoolList contains a list of SandboxWarmPool.
// +kubebuilder:object:root=true
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxWarmPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxWarmPool{}, &SandboxWarmPoolList{})
}
