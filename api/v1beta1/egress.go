package v1beta1

// Egress modes of a Sandbox (the harness flow's config.network), asked for with annotations on the
// Sandbox and realised by the Sandbox controller as one NetworkPolicy named after the Sandbox,
// owned by it, selecting only its pod, and written before the pod is created. docs/egress.md
// gives the exact policy of each mode.
const (
	// EgressAnnotation asks for an egress mode: allow-all, deny-all or restricted. Without it a
	// raw Sandbox gets allow-all, and a Sandbox made from a template its template's policy.
	EgressAnnotation = "agents.x-k8s.io/egress"
	// EgressCIDRsAnnotation lists, comma-separated, the destinations restricted mode allows
	// ("10.0.0.0/8,2001:db8::/32"; a bare address means that one host). Read only when the mode
	// is restricted.
	EgressCIDRsAnnotation = "agents.x-k8s.io/egress-cidrs"
	// EgressDomainsAnnotation lists, comma- or space-separated, the host names restricted mode
	// allows besides its CIDRs: exact names ("pypi.org") and one-label wildcards
	// ("*.github.com": a name one label below github.com, not github.com itself). On a raw
	// Sandbox it is read only when the mode is restricted; on a SandboxTemplate it limits the
	// egress of every Sandbox made from it to these names and DNS (plus the template's own
	// networkPolicy egress rules, when it has them). Names are enforced through the cluster's
	// policy engine (a CiliumNetworkPolicy with toFQDNs); docs/egress.md, "Domains".
	EgressDomainsAnnotation = "agents.x-k8s.io/egress-domains"
	// EgressDomainsFailOpenAnnotation set to "true" on a Sandbox or template lets its pods run
	// on a cluster that cannot enforce names, with egress open to everything allow-all allows.
	// Without it such a Sandbox gets no pod (EgressDomainsUnenforceable): an allow-list that
	// silently allows everything is worse than none.
	EgressDomainsFailOpenAnnotation = "agents.x-k8s.io/egress-domains-fail-open"
	// IngressFromPodsAnnotation declares, as a label selector ("app=ax"), pods of the Sandbox's
	// namespace that may open connections to it besides the router (the claim-per-conversation flow's direct mode).
	IngressFromPodsAnnotation = "agents.x-k8s.io/ingress-from-pods"
	// NetworkPolicyManagementAnnotation set to NetworkPolicyUnmanaged opts the Sandbox out of
	// the NetworkPolicy the controller keeps for it (ingress from the router only, its egress
	// mode). Sandboxes made from an Unmanaged template carry it.
	NetworkPolicyManagementAnnotation = "agents.x-k8s.io/network-policy-management"
	// NetworkPolicyUnmanaged is the one value NetworkPolicyManagementAnnotation acts on.
	NetworkPolicyUnmanaged = "Unmanaged"
)

// Values of EgressAnnotation.
const (
	// EgressAllowAll: every destination but link-local addresses (cloud metadata) an admin has
	// not opened.
	EgressAllowAll = "allow-all"
	// EgressDenyAll: a policy that allows no egress at all, DNS included.
	EgressDenyAll = "deny-all"
	// EgressRestricted: a policy that allows the listed CIDRs (no link-local ones unless an
	// admin opened them), and DNS (UDP and TCP port 53) to the cluster DNS only.
	EgressRestricted = "restricted"
)

// SandboxConditionEgressPolicy reports whether the egress mode the annotations ask for is in
// force. It is present only while EgressAnnotation or EgressCIDRsAnnotation is set.
const SandboxConditionEgressPolicy = "EgressPolicy"

// Reasons of the EgressPolicy condition. The two problems are also the Ready reason while they
// keep the pod from being created, and a Warning event on the Sandbox.
const (
	// ReasonEgressApplied (True): the policy matches the annotations. The message starts with
	// the applied mode as the SDK compares it ("deny-all:", "restricted to 10.0.0.0/8:").
	ReasonEgressApplied = "EgressApplied"
	// ReasonInvalidEgress (False): the annotations are not a valid mode or CIDR list. No pod is
	// created until they are fixed; a running pod keeps the last policy that was applied.
	ReasonInvalidEgress = "InvalidEgress"
	// ReasonEgressPolicyConflict (False): a NetworkPolicy named after the Sandbox exists and is
	// not controlled by it; it is left alone and no pod is created.
	ReasonEgressPolicyConflict = "EgressPolicyConflict"
	// ReasonEgressIgnored (False): the annotations are valid but not in force: the Sandbox was
	// made from a template that does not allow them (its own NetworkPolicy governs egress), or
	// the Sandbox's NetworkPolicy is Unmanaged. The pod runs.
	ReasonEgressIgnored = "EgressIgnored"
	// ReasonEgressDomainsUnenforceable (False): the Sandbox (or its template) lists domains and
	// the cluster has no engine that enforces names (no cilium.io/v2 CiliumNetworkPolicy when
	// the controller started). No pod is created, unless fail-open is asked for.
	ReasonEgressDomainsUnenforceable = "EgressDomainsUnenforceable"
	// ReasonEgressDomainsFailOpen (True): as ReasonEgressDomainsUnenforceable, but the Sandbox
	// (or its template) asked for fail-open: the pod runs with egress open to everything
	// allow-all allows. The message starts like ReasonEgressApplied's, so the SDK's wait ends.
	ReasonEgressDomainsFailOpen = "EgressDomainsFailOpen"
)
