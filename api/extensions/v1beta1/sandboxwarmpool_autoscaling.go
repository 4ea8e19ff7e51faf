package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxWarmPoolAutoscaling sizes a pool from the rate at which claims arrive: the pool keeps
// enough members to serve headroomSeconds of the observed claim rate, between minReplicas and
// maxReplicas. When it is set, the pool controller owns spec.replicas (no HPA may target the
// pool as well).
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.maxReplicas >= self.minReplicas",message="maxReplicas must be greater than or equal to minReplicas"
type SandboxWarmPoolAutoscaling struct {
	// minReplicas is the fewest members the pool keeps, also after scaleToZeroAfter without a
	// claim; 0 by default (an idle pool holds nothing).
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most members the pool keeps, whatever the claim rate.
	// +kubebuilder:validation:Minimum=1
	// +required
	MaxReplicas int32 `json:"maxReplicas"`

	// headroomSeconds is the target: the pool keeps ceil(claim rate per second ×
	// headroomSeconds) members, enough to serve that many seconds of claims while it refills.
	// 10 by default.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	HeadroomSeconds *int32 `json:"headroomSeconds,omitempty"`

	// window is how far back claims are counted for the rate (at most 1h); 60s by default.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="window must be between 1s and 1h"
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`

	// scaleDownStabilization is how long a lower size must be wanted before the pool shrinks to
	// it (the highest size wanted over this span wins, as an HPA's stabilization window); the
	// pool grows at once. 300s by default.
	// +kubebuilder:default="300s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="scaleDownStabilization must be between 0s and 1h"
	// +optional
	ScaleDownStabilization *metav1.Duration `json:"scaleDownStabilization,omitempty"`

	// scaleToZeroAfter is how long after the last claim the pool drops to minReplicas (which
	// may be 0), without waiting for the stabilization. 10m by default.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="scaleToZeroAfter must be at least 1s"
	// +optional
	ScaleToZeroAfter *metav1.Duration `json:"scaleToZeroAfter,omitempty"`
}

// SandboxWarmPoolAutoscalingStatus is what the autoscaler last saw and decided.
type SandboxWarmPoolAutoscalingStatus struct {
	// desiredReplicas is the size the autoscaler last set in spec.replicas.
	// +kubebuilder:validation:Minimum=0
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`

	// observedClaimRate is the claims per second counted over the window (the claims the pool
	// served and those it could have served but had no ready member for).
	// +optional
	ObservedClaimRate *resource.Quantity `json:"observedClaimRate,omitempty"`

	// lastClaimTime is when the last claim the pool could serve arrived.
	// +optional
	LastClaimTime *metav1.Time `json:"lastClaimTime,omitempty"`

	// lastScaleTime is when the autoscaler last changed spec.replicas.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`

	// reason says why the pool has its size: ScaledUp, ScaledDown, Stabilizing (a lower size is
	// wanted but not for long enough yet), Idle (no claim for scaleToZeroAfter) or Steady.
	// +optional
	Reason string `json:"reason,omitempty"`

	// message says the same in words, with the numbers.
	// +optional
	Message string `json:"message,omitempty"`
}

// Reasons of status.autoscaling.reason.
const (
	AutoscaleReasonScaledUp    = "ScaledUp"
	AutoscaleReasonScaledDown  = "ScaledDown"
	AutoscaleReasonStabilizing = "Stabilizing"
	AutoscaleReasonIdle        = "Idle"
	AutoscaleReasonSteady      = "Steady"
)
