// Package fqdnpolicy enforces a domain allow-list (agents.x-k8s.io/egress-domains) through the
// one engine the controller knows that matches names: Cilium, with a CiliumNetworkPolicy whose
// toFQDNs rules allow the names and whose DNS rule sends the pod's lookups through Cilium's DNS
// proxy, which learns the addresses the names resolve to. The policy is written as unstructured
// JSON: Cilium's Go module is far too heavy for a handful of fields. Which engine the cluster
// has is found once, at the controller's start (Detect).
package fqdnpolicy

import (
	"maps"
	"net/netip"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// GVK is Cilium's namespaced policy kind.
var GVK = schema.GroupVersionKind{Group: "cilium.io", Version: "v2", Kind: "CiliumNetworkPolicy"}

// Resource is its plural, as discovery lists it.
const Resource = "ciliumnetworkpolicies"

// +kubebuilder:rbac:groups=cilium.io,resources=ciliumnetworkpolicies,verbs=get;list;watch;create;update;patch;delete

// DNS names the cluster DNS that the policy's DNS rule lets the pod query through the proxy.
type DNS struct {
	// Namespace and PodLabels select the DNS pods (Cilium matches them after the Service's
	// translation).
	Namespace string
	PodLabels map[string]string
	// ServiceIPs are the addresses of their Service, for a datapath that sees a lookup before
	// it is translated: the proxy must see those lookups too, or no name is ever learned.
	ServiceIPs []netip.Addr
}

// Cilium's label source of Kubernetes pod labels, and the label its endpoints carry with their
// namespace.
const (
	k8sSource      = "k8s:"
	namespaceLabel = "k8s:io.kubernetes.pod.namespace"
)

// The fields of a CiliumNetworkPolicy spec this package writes (cilium.io/v2, pkg/policy/api).
type (
	spec struct {
		EndpointSelector selector     `json:"endpointSelector"`
		Egress           []egressRule `json:"egress"`
	}
	selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	egressRule struct {
		ToEndpoints []selector     `json:"toEndpoints,omitempty"`
		ToCIDR      []string       `json:"toCIDR,omitempty"`
		ToFQDNs     []fqdnSelector `json:"toFQDNs,omitempty"`
		ToPorts     []portRule     `json:"toPorts,omitempty"`
	}
	fqdnSelector struct {
		MatchName    string `json:"matchName,omitempty"`
		MatchPattern string `json:"matchPattern,omitempty"`
	}
	portRule struct {
		Ports []portProtocol `json:"ports"`
		Rules *l7Rules       `json:"rules,omitempty"`
	}
	portProtocol struct {
		Port     string `json:"port"`
		Protocol string `json:"protocol"`
	}
	l7Rules struct {
		DNS []fqdnSelector `json:"dns"`
	}
)

// Spec is the policy of the pods podLabels select: egress to the domains (every port), and DNS
// to the cluster DNS through the proxy (every name may be looked up; only the listed ones
// become reachable). It allows nothing else: the pod's NetworkPolicy keeps the rest of its egress
// mode, and allows add up.
func Spec(podLabels map[string]string, domains []string, dns DNS) map[string]any {
	lookups := []portRule{{
		Ports: []portProtocol{{Port: strconv.Itoa(egress.DNSPort), Protocol: "ANY"}},
		Rules: &l7Rules{DNS: []fqdnSelector{{MatchPattern: "*"}}},
	}}
	dnsPods := map[string]string{namespaceLabel: dns.Namespace}
	for k, v := range dns.PodLabels {
		dnsPods[k8sSource+k] = v
	}
	s := spec{
		EndpointSelector: selector{MatchLabels: maps.Clone(podLabels)},
		Egress:           []egressRule{{ToEndpoints: []selector{{MatchLabels: dnsPods}}, ToPorts: lookups}},
	}
	if len(dns.ServiceIPs) > 0 {
		cidrs := make([]string, 0, len(dns.ServiceIPs))
		for _, ip := range dns.ServiceIPs {
			cidrs = append(cidrs, netip.PrefixFrom(ip, ip.BitLen()).String())
		}
		s.Egress = append(s.Egress, egressRule{ToCIDR: cidrs, ToPorts: lookups})
	}
	names := make([]fqdnSelector, 0, len(domains))
	for _, d := range domains {
		if egress.IsWildcard(d) {
			// Cilium's "*." matches exactly one label, as our lists mean.
			names = append(names, fqdnSelector{MatchPattern: d})
		} else {
			names = append(names, fqdnSelector{MatchName: d})
		}
	}
	if len(names) > 0 {
		// Never a rule without a destination: Cilium would read it as every destination.
		s.Egress = append(s.Egress, egressRule{ToFQDNs: names})
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
	if err != nil {
		panic(err) // plain structs of strings: cannot fail
	}
	return out
}

// New is a policy object named name in namespace, with labels and spec.
func New(namespace, name string, labels map[string]string, spec map[string]any) *unstructured.Unstructured {
	u := Empty()
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(maps.Clone(labels))
	u.Object["spec"] = spec
	return u
}

// Empty is an object of the kind, to read one into.
func Empty() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	return u
}

// SameSpec reports whether the policy's spec is desired.
func SameSpec(policy *unstructured.Unstructured, desired map[string]any) bool {
	return equality.Semantic.DeepEqual(policy.Object["spec"], desired)
}

// SetSpec replaces the policy's spec.
func SetSpec(policy *unstructured.Unstructured, desired map[string]any) {
	policy.Object["spec"] = desired
}
