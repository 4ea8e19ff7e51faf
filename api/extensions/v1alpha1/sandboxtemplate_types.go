package v1alpha1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// NetworkPolicyManagement defines whether the controller automatically generates and manages a
// shared NetworkPolicy for this template.
// +kubebuilder:validation:Enum=Managed;Unmanaged
type NetworkPolicyManagement string

const (
	// NetworkPolicyManagementManaged means the controller ensures a shared NetworkPolicy exists:
	// the user's rules, or the secure default when none are given.
	NetworkPolicyManagementManaged NetworkPolicyManagement = "Managed"
	// NetworkPolicyManagementUnmanaged means the controller creates no NetworkPolicy, leaving
	// networking to external systems (like Cilium).
	NetworkPolicyManagementUnmanaged NetworkPolicyManagement = "Unmanaged"
)

// EnvVarsInjectionPolicy defines whether a SandboxClaim is allowed to inject or override
// environment variables.
// +kubebuilder:validation:Enum=Allowed;Overrides;Disallowed
type EnvVarsInjectionPolicy string

const (
	// EnvVarsInjectionPolicyAllowed allows a SandboxClaim to inject new environment variables,
	// but not override existing ones.
	EnvVarsInjectionPolicyAllowed EnvVarsInjectionPolicy = "Allowed"
	// EnvVarsInjectionPolicyOverrides allows a SandboxClaim to inject new and override existing
	// environment variables.
	EnvVarsInjectionPolicyOverrides EnvVarsInjectionPolicy = "Overrides"
	// EnvVarsInjectionPolicyDisallowed prevents a SandboxClaim from injecting any environment variables.
	EnvVarsInjectionPolicyDisallowed EnvVarsInjectionPolicy = "Disallowed"
)

// NetworkPolicySpec is the restricted subset of a NetworkPolicySpec a template may set; the
// controller owns podSelector and policyTypes to keep a default-deny posture.
type NetworkPolicySpec struct {
	// ingress is a list of ingress rules to be applied to the sandbox. Traffic is allowed to the
	// sandbox if it matches at least one rule. If this list is empty, all ingress traffic is
	// blocked (Default Deny).
	// +listType=atomic
	// +optional
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`

	// egress is a list of egress rules to be applied to the sandbox. Traffic is allowed out of the
	// sandbox if it matches at least one rule. If this list is empty, all egress traffic is
	// blocked (Default Deny).
	// +listType=atomic
	// +optional
	Egress []networkingv1.NetworkPolicyEgressRule `json:"egress,omitempty"`
}

// SandboxTemplateSpec defines the desired state of SandboxTemplate.
type SandboxTemplateSpec struct {
	// podTemplate defines the object template that describes the pod spec that will be used to
	// create an agent sandbox. If AutomountServiceAccountToken is not specified in the PodSpec, it
	// defaults to false to ensure a secure-by-default environment.
	// +required
	PodTemplate agentsv1alpha1.PodTemplate `json:"podTemplate"`

	// volumeClaimTemplates is a list of claims that pods created from this template are allowed
	// to reference. When a SandboxClaim or SandboxWarmPool creates a sandbox from this template,
	// PVCs will be created from these templates. This list is atomic.
	// +listType=atomic
	// +optional
	VolumeClaimTemplates []agentsv1alpha1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// networkPolicy defines the network policy applied to the sandboxes created from this
	// template, as one NetworkPolicy shared by all of them. Ignored when networkPolicyManagement
	// is Unmanaged; when Managed and omitted, a secure default applies (ingress only from the
	// sandbox router, egress to the public internet only).
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// networkPolicyManagement defines whether the controller manages the NetworkPolicy.
	// Valid values are "Managed" (default) or "Unmanaged".
	// +kubebuilder:default=Managed
	// +optional
	NetworkPolicyManagement NetworkPolicyManagement `json:"networkPolicyManagement,omitempty"`

	// envVarsInjectionPolicy allows a SandboxClaim to inject or override environment variables
	// defined in the template. If set to Disallowed, the SandboxClaim will be rejected if it
	// specifies any environment variables.
	// +kubebuilder:default=Disallowed
	// +optional
	EnvVarsInjectionPolicy EnvVarsInjectionPolicy `json:"envVarsInjectionPolicy,omitempty"`
}

// SandboxTemplateStatus defines the observed state of SandboxTemplate.
type SandboxTemplateStatus struct{}

// SandboxTemplate is the Schema for the sandbox template API.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=sbxt;sandboxtemplate
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec defines the desired state of SandboxTemplate
	// +required
	Spec SandboxTemplateSpec `json:"spec"`

	// status defines the observed state of SandboxTemplate
	// +optional
	Status SandboxTemplateStatus `json:"status,omitempty"`
}

// SandboxTemplateList contains a list of SandboxTemplate.
// +kubebuilder:object:root=true
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxTemplate{}, &SandboxTemplateList{})
}
