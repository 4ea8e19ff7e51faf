package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxTemplateRef names a SandboxTemplate.
type SandboxTemplateRef struct {
	// name of the SandboxTemplate.
	// +required
	Name string `json:"name"`
}

// SandboxWarmPoolUpdateStrategyType is how a pool replaces its stale sandboxes.
// +kubebuilder:validation:Enum=Recreate;OnReplenish
type SandboxWarmPoolUpdateStrategyType string

const (
	// RecreateSandboxWarmPoolUpdateStrategyType deletes stale unclaimed sandboxes at once.
	RecreateSandboxWarmPoolUpdateStrategyType SandboxWarmPoolUpdateStrategyType = "Recreate"
	// OnReplenishSandboxWarmPoolUpdateStrategyType replaces stale sandboxes only when they are
	// deleted or claimed. The default.
	OnReplenishSandboxWarmPoolUpdateStrategyType SandboxWarmPoolUpdateStrategyType = "OnReplenish"
)

// SandboxWarmPoolUpdateStrategy is the update strategy of a SandboxWarmPool.
type SandboxWarmPoolUpdateStrategy struct {
	// type of the strategy; OnReplenish by default.
	// +kubebuilder:default=OnReplenish
	// +optional
	Type SandboxWarmPoolUpdateStrategyType `json:"type,omitempty"`
}

// SandboxWarmPoolSpec is the desired state of a SandboxWarmPool.
type SandboxWarmPoolSpec struct {
	// replicas is how many sandboxes the pool keeps ready (an HPA may set it through the
	// scale subresource).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// sandboxTemplateRef names the template the pool's sandboxes are made from.
	// +required
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef,omitempty"`

	// updateStrategy is how the pool replaces unclaimed sandboxes that no longer match the
	// template (OnReplenish by default). Metadata-only template edits never make one stale.
	// +optional
	UpdateStrategy *SandboxWarmPoolUpdateStrategy `json:"updateStrategy,omitempty"`

	// autoscaling sizes the pool from the claim rate; the pool controller then writes
	// spec.replicas itself, and no HPA may target the pool as well. Absent: spec.replicas is
	// left to its writer (a person, an HPA through the scale subresource).
	// +optional
	Autoscaling *SandboxWarmPoolAutoscaling `json:"autoscaling,omitempty"`
}

// SandboxWarmPoolStatus is the observed state of a SandboxWarmPool.
type SandboxWarmPoolStatus struct {
	// replicas is the number of sandboxes in the pool.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of the pool's sandboxes that are Ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// selector is the label selector of the pool's sandboxes.
	// +optional
	Selector string `json:"selector,omitempty"`

	// observedGeneration is the pool generation the controller last acted on.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions of the pool (Ready: PoolReady, Filling, MembersUnschedulable,
	// TemplateNotFound). Not in upstream's v1beta1: it is v1alpha1's status.conditions, kept
	// here because this is the stored version and the controller writes it through /status.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// autoscaling is what the autoscaler last saw and decided; set only with spec.autoscaling.
	// +optional
	Autoscaling *SandboxWarmPoolAutoscalingStatus `json:"autoscaling,omitempty"`
}

// SandboxWarmPool keeps a number of ready sandboxes of one template for claims to take.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
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

	// spec is the desired state of the pool.
	// +required
	Spec SandboxWarmPoolSpec `json:"spec"`

	// status is the observed state of the pool.
	// +optional
	Status SandboxWarmPoolStatus `json:"status,omitempty"`
}

// SandboxWarmPoolList is a list of SandboxWarmPools.
// +kubebuilder:object:root=true
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxWarmPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxWarmPool{}, &SandboxWarmPoolList{})
}
