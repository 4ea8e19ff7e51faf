package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// EmbeddedObjectMetadata is the subset of object metadata a template may set on the objects made from it.
type EmbeddedObjectMetadata struct {
	// name must be unique within a namespace. For a volume claim template it names both the PVC
	// (as <name>-<sandbox name>) and the pod volume it backs.
	// +optional
	Name string `json:"name,omitempty"`

	// labels to put on the object made from the template.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations to put on the object made from the template.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodMetadata is the labels and annotations set on a sandbox pod.
type PodMetadata struct {
	// labels defines the map of string keys and values that can be used to organize and categorize
	// (scope and select) objects.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations is an unstructured key value map stored with a resource.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplate describes the pod of a sandbox.
type PodTemplate struct {
	// spec is the Pod's spec
	// +required
	Spec corev1.PodSpec `json:"spec"`

	// metadata holds the labels and annotations of the pod.
	// +optional
	Metadata PodMetadata `json:"metadata,omitempty"`
}

// PersistentVolumeClaimTemplate describes a PVC created for, and owned by, a sandbox.
type PersistentVolumeClaimTemplate struct {
	// metadata of the PVC; metadata.name names the claim and the pod volume it backs.
	// +optional
	EmbeddedObjectMetadata `json:"metadata,omitempty"`

	// spec is the PVC's spec
	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}
