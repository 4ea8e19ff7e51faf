package v1beta1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// NetworkPolicyManagement says whether the controller keeps a shared NetworkPolicy for a template.
// +kubebuilder:validation:Enum=Managed;Unmanaged
type NetworkPolicyManagement string

const (
	// NetworkPolicyManagementManaged keeps one NetworkPolicy per template: the template's rules,
	// or the secure default when it has none. The default.
	NetworkPolicyManagementManaged NetworkPolicyManagement = "Managed"
	// NetworkPolicyManagementUnmanaged makes no NetworkPolicy, leaving it to other systems.
	NetworkPolicyManagementUnmanaged NetworkPolicyManagement = "Unmanaged"
)

// EnvVarsInjectionPolicy says whether claims may add or override environment variables.
// +kubebuilder:validation:Enum=Allowed;Overrides;Disallowed
type EnvVarsInjectionPolicy string

const (
	// EnvVarsInjectionPolicyAllowed lets claims add variables the template does not define.
	EnvVarsInjectionPolicyAllowed EnvVarsInjectionPolicy = "Allowed"
	// EnvVarsInjectionPolicyOverrides lets claims add variables and override the template's.
	EnvVarsInjectionPolicyOverrides EnvVarsInjectionPolicy = "Overrides"
	// EnvVarsInjectionPolicyDisallowed rejects claims that set any variable. The default.
	EnvVarsInjectionPolicyDisallowed EnvVarsInjectionPolicy = "Disallowed"
)

// VolumeClaimTemplatesPolicy says whether claims may add or override volume claim templates.
// +kubebuilder:validation:Enum=Disallowed;Allowed;Overrides
type VolumeClaimTemplatesPolicy string

const (
	// VolumeClaimTemplatesPolicyDisallowed rejects claims that set volume claim templates. The default.
	VolumeClaimTemplatesPolicyDisallowed VolumeClaimTemplatesPolicy = "Disallowed"
	// VolumeClaimTemplatesPolicyAllowed lets claims add templates with new names.
	VolumeClaimTemplatesPolicyAllowed VolumeClaimTemplatesPolicy = "Allowed"
	// VolumeClaimTemplatesPolicyOverrides lets claims add templates and replace the template's.
	VolumeClaimTemplatesPolicyOverrides VolumeClaimTemplatesPolicy = "Overrides"
)

// NetworkPolicySpec is the part of a NetworkPolicySpec a template may set; the controller owns
// podSelector and policyTypes.
type NetworkPolicySpec struct {
	// ingress rules; traffic matching any is allowed in. Empty denies all ingress.
	// +listType=atomic
	// +optional
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`

	// egress rules; traffic matching any is allowed out. Empty denies all egress.
	// +listType=atomic
	// +optional
	Egress []networkingv1.NetworkPolicyEgressRule `json:"egress,omitempty"`
}

// SandboxTemplateSpec is the desired state of a SandboxTemplate.
type SandboxTemplateSpec struct {
	agentsv1beta1.SandboxBlueprint `json:",inline"`

	// networkPolicy is the rule set of the one NetworkPolicy shared by the template's sandboxes.
	// Ignored when networkPolicyManagement is Unmanaged; when Managed and unset, the secure
	// default applies (ingress only from the sandbox router, egress to public addresses only).
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// networkPolicyManagement is Managed (the default) or Unmanaged.
	// +kubebuilder:default=Managed
	// +optional
	NetworkPolicyManagement NetworkPolicyManagement `json:"networkPolicyManagement,omitempty"`

	// envVarsInjectionPolicy says whether claims may set spec.env (Disallowed by default).
	// +kubebuilder:default=Disallowed
	// +optional
	EnvVarsInjectionPolicy EnvVarsInjectionPolicy `json:"envVarsInjectionPolicy,omitempty"`

	// volumeClaimTemplatesPolicy says whether claims may set spec.volumeClaimTemplates
	// (Disallowed by default).
	// +kubebuilder:default=Disallowed
	// +optional
	VolumeClaimTemplatesPolicy VolumeClaimTemplatesPolicy `json:"volumeClaimTemplatesPolicy,omitempty"`
}

// SandboxTemplate describes the sandboxes that claims and warm pools make.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Namespaced,shortName=sbxt;sandboxtemplate
type SandboxTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the template.
	// +required
	Spec SandboxTemplateSpec `json:"spec"`
}

// SandboxTemplateList is a list of SandboxTemplates.
// +kubebuilder:object:root=true
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxTemplate{}, &SandboxTemplateList{})
}
