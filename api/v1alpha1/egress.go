package v1alpha1

// The names of the contract have one source, v1beta1 (the hub and storage version), where
// each is documented; these are the same constants under the v1alpha1 package.

import agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"

// Egress modes of a Sandbox (the harness flow's config.network), asked for with annotations on the
// Sandbox and realised by the Sandbox controller as one NetworkPolicy named after the Sandbox,
// owned by it, selecting only its pod, and written before the pod is created. docs/egress.md
// gives the exact policy of each mode.
const (
	EgressAnnotation                  = agentsv1beta1.EgressAnnotation
	EgressCIDRsAnnotation             = agentsv1beta1.EgressCIDRsAnnotation
	EgressDomainsAnnotation           = agentsv1beta1.EgressDomainsAnnotation
	EgressDomainsFailOpenAnnotation   = agentsv1beta1.EgressDomainsFailOpenAnnotation
	IngressFromPodsAnnotation         = agentsv1beta1.IngressFromPodsAnnotation
	NetworkPolicyManagementAnnotation = agentsv1beta1.NetworkPolicyManagementAnnotation
	NetworkPolicyUnmanaged            = agentsv1beta1.NetworkPolicyUnmanaged
)

// Values of EgressAnnotation.
const (
	EgressAllowAll   = agentsv1beta1.EgressAllowAll
	EgressDenyAll    = agentsv1beta1.EgressDenyAll
	EgressRestricted = agentsv1beta1.EgressRestricted
)

const SandboxConditionEgressPolicy = agentsv1beta1.SandboxConditionEgressPolicy

// Reasons of the EgressPolicy condition. The two problems are also the Ready reason while they
// keep the pod from being created, and a Warning event on the Sandbox.
const (
	ReasonEgressApplied        = agentsv1beta1.ReasonEgressApplied
	ReasonInvalidEgress        = agentsv1beta1.ReasonInvalidEgress
	ReasonEgressPolicyConflict = agentsv1beta1.ReasonEgressPolicyConflict
	ReasonEgressIgnored        = agentsv1beta1.ReasonEgressIgnored

	ReasonEgressDomainsUnenforceable = agentsv1beta1.ReasonEgressDomainsUnenforceable
	ReasonEgressDomainsFailOpen      = agentsv1beta1.ReasonEgressDomainsFailOpen
)
