// Package v1beta1 holds the agents.x-k8s.io/v1beta1 API (Sandbox) as upstream agent-sandbox
// defines it. It is served beside v1alpha1; objects are stored as v1alpha1 (the hub the
// controllers use) and converted by the controller's conversion webhook.
// +kubebuilder:object:generate=true
// +groupName=agents.x-k8s.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the Sandbox kind in this package.
	GroupVersion = schema.GroupVersion{Group: "agents.x-k8s.io", Version: "v1beta1"}

	// SchemeBuilder registers the kinds of this group version with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this group version to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
