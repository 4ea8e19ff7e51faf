// Package v1alpha1 contains API Schema definitions for the agents v1alpha1 API group.
// +kubebuilder:object:generate=true
// +groupName=agents.x-k8s.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the Sandbox kind.
	GroupVersion = schema.GroupVersion{Group: "agents.x-k8s.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this group with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this group to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
