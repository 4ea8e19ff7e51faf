package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
)

// PodMetadata holds the labels and annotations set on a sandbox pod.
type PodMetadata struct {
	// labels to put on the pod, to organize and select it.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations to put on the pod: arbitrary metadata for tools, not queryable.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// EmbeddedObjectMetadata is the part of object metadata a template may set on what it makes.
type EmbeddedObjectMetadata struct {
	// name of the object; for a volume claim template it names the PVC and the pod volume.
	// +optional
	Name string `json:"name,omitempty"`

	// labels to put on the object.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations to put on the object.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplate describes the pod of a sandbox.
type PodTemplate struct {
	// spec is the pod's spec.
	// +required
	Spec corev1.PodSpec `json:"spec"`

	// metadata of the pod; only labels and annotations are used.
	// +optional
	ObjectMeta PodMetadata `json:"metadata"`
}

// PersistentVolumeClaimTemplate describes a PVC made for, and owned by, a sandbox.
type PersistentVolumeClaimTemplate struct {
	// metadata of the PVC.
	// +optional
	EmbeddedObjectMetadata `json:"metadata"`

	// spec is the PVC's spec.
	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// SandboxBlueprint is the workload part shared by Sandbox and SandboxTemplate; runtime-only
// fields (operatingMode, lifecycle) are not in it.
type SandboxBlueprint struct {
	// podTemplate describes the sandbox's pod. When a claim or pool makes the sandbox from a
	// template and the pod spec leaves automountServiceAccountToken unset, it defaults to false.
	// +required
	PodTemplate PodTemplate `json:"podTemplate"`

	// volumeClaimTemplates are the PVCs made for the sandbox, which its pod may mount. The list
	// is replaced as a whole on update.
	// +listType=atomic
	// +optional
	VolumeClaimTemplates []PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// service says whether the sandbox gets a headless Service: true creates one, false removes
	// an owned one, unset keeps an existing Service but creates none.
	// +optional
	Service *bool `json:"service,omitempty"`
}
