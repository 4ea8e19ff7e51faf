// Package egresspolicy builds the NetworkPolicy that enforces a Sandbox's egress mode and the pods it
// admits. The Sandbox and SandboxTemplate controllers use it; what a Sandbox may ask for (the
// modes, their annotations and how they parse) is the public pkg/egress, which the SDK and sbx
// share with the controller.
package egresspolicy

import (
	"fmt"
	"maps"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	// Same name, other package: the public annotation contract this one enforces.
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// Peers are the parties of the cluster a Sandbox's NetworkPolicy names. The install fixes
// them (controller flags); a tenant cannot change them.
type Peers struct {
	// RouterNamespace and RouterPodLabels select the router's pods: the one source every
	// sandbox admits.
	RouterNamespace string
	RouterPodLabels map[string]string
	// DNSNamespace and DNSPodLabels select the cluster DNS pods, and DNSServiceIPs are the
	// addresses of their Service: restricted mode opens port 53 to these alone.
	DNSNamespace  string
	DNSPodLabels  map[string]string
	DNSServiceIPs []netip.Addr
	// AllowedLinkLocal are the link-local prefixes an admin opened (a node-local DNS cache at
	// 169.254.20.10/32, say). Every other link-local address (cloud metadata servers at
	// 169.254.169.254) stays closed whatever a Sandbox asks for.
	AllowedLinkLocal []netip.Prefix
}

// DefaultPeers are a standard install's: the router of `config/` and the kube-dns pods.
func DefaultPeers() Peers {
	return Peers{
		RouterNamespace: "agent-sandbox-system",
		RouterPodLabels: map[string]string{agentsv1beta1.RouterPodLabel: agentsv1beta1.RouterPodLabelValue},
		DNSNamespace:    "kube-system",
		DNSPodLabels:    map[string]string{"k8s-app": "kube-dns"},
	}
}

// LinkLocal are the ranges closed unless an admin opens part of them.
var LinkLocal = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}

// Within reports whether every address of p lies in outer.
func Within(p, outer netip.Prefix) bool {
	return outer.Contains(p.Addr()) && p.Bits() >= outer.Bits()
}

// InLinkLocal reports whether p lies inside one of the LinkLocal ranges.
func InLinkLocal(p netip.Prefix) bool {
	for _, ll := range LinkLocal {
		if Within(p, ll) {
			return true
		}
	}
	return false
}

// Policy is what one Sandbox's NetworkPolicy enforces.
type Policy struct {
	// Egress is the egress mode; nil leaves egress to other policies (the template's, for a
	// Sandbox made from one).
	Egress *egress.Spec
	// IngressFrom selects further pods of the Sandbox's namespace that may connect to it.
	IngressFrom *metav1.LabelSelector
}

// CheckLinkLocal refuses a restricted CIDR inside a link-local range that no allowed prefix
// covers: that is how a Sandbox would reach the cloud's metadata server.
func (p Peers) CheckLinkLocal(s egress.Spec) error {
	for _, c := range s.CIDRs {
		pfx := netip.MustParsePrefix(c) // canonical: New parsed it
		if InLinkLocal(pfx) && !p.linkLocalAllowed(pfx) {
			return fmt.Errorf("egress CIDR %s is link-local (%v: cloud metadata and node-local services); "+
				"only the prefixes an admin allows (controller flag --egress-allowed-link-local) may be opened", c, LinkLocal)
		}
	}
	return nil
}

func (p Peers) linkLocalAllowed(pfx netip.Prefix) bool {
	for _, a := range p.AllowedLinkLocal {
		if Within(pfx, a) {
			return true
		}
	}
	return false
}

// ParseIngressFrom reads the IngressFromPodsAnnotation: a label selector (k=v, k in (a,b),
// k) of pods in the Sandbox's namespace; nil when the annotation is absent.
func ParseIngressFrom(annotations map[string]string) (*metav1.LabelSelector, error) {
	v, ok := annotations[agentsv1beta1.IngressFromPodsAnnotation]
	if !ok {
		return nil, nil
	}
	if strings.TrimSpace(v) == "" {
		return nil, fmt.Errorf("annotation %s is empty; write a label selector of the pods that may connect (app=agent)",
			agentsv1beta1.IngressFromPodsAnnotation)
	}
	sel, err := metav1.ParseToLabelSelector(v)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %q is not a label selector: %w", agentsv1beta1.IngressFromPodsAnnotation, v, err)
	}
	if s, err := metav1.LabelSelectorAsSelector(sel); err != nil || s.Empty() {
		return nil, fmt.Errorf("annotation %s: %q selects no particular pods; name them by label (app=agent)",
			agentsv1beta1.IngressFromPodsAnnotation, v)
	}
	// As the API server stores it, so the policy is not rewritten on every reconcile.
	if len(sel.MatchLabels) == 0 {
		sel.MatchLabels = nil
	}
	if len(sel.MatchExpressions) == 0 {
		sel.MatchExpressions = nil
	}
	return sel, nil
}

// PolicySpec is the NetworkPolicy of the pod with podLabels: ingress only from the router (and
// the declared pods), and egress as pol says.
func (p Peers) PolicySpec(podLabels map[string]string, pol Policy) networkingv1.NetworkPolicySpec {
	ps := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: maps.Clone(podLabels)},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{p.routerPeer()}}},
	}
	if pol.IngressFrom != nil {
		ps.Ingress = append(ps.Ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{
			{PodSelector: pol.IngressFrom.DeepCopy()},
		}})
	}
	if pol.Egress == nil {
		return ps
	}
	ps.PolicyTypes = append(ps.PolicyTypes, networkingv1.PolicyTypeEgress)
	ps.Egress = p.egressRules(*pol.Egress)
	return ps
}

// routerPeer selects the router's pods.
func (p Peers) routerPeer() networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: p.RouterNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(p.RouterPodLabels)},
	}
}

// AdmitsRouter reports whether a policy has an ingress rule that lets the router's pods in on
// every port, as the Sandbox's own policy would.
func (p Peers) AdmitsRouter(spec networkingv1.NetworkPolicySpec) bool {
	router := p.routerPeer()
	for _, rule := range spec.Ingress {
		if len(rule.Ports) > 0 {
			continue
		}
		for _, from := range rule.From {
			if equality.Semantic.DeepEqual(from, router) {
				return true
			}
		}
	}
	return false
}

// EgressRules are the egress rules of mode s alone, for a policy that adds them to others (a
// template's with a domain list: DNS, and for fail-open allow-all's).
func (p Peers) EgressRules(s egress.Spec) []networkingv1.NetworkPolicyEgressRule {
	return p.egressRules(s)
}

// egressRules: allow-all is every destination but the closed link-local ranges; deny-all is
// none; restricted is its CIDRs (link-local carved out) and port 53 of the cluster DNS.
func (p Peers) egressRules(s egress.Spec) []networkingv1.NetworkPolicyEgressRule {
	switch s.Mode {
	case egress.DenyAll:
		return nil
	case egress.AllowAll:
		to := []networkingv1.NetworkPolicyPeer{
			// Every pod of the cluster: CIDR rules need not match pod addresses on every CNI.
			{NamespaceSelector: &metav1.LabelSelector{}},
			p.ipBlock(netip.MustParsePrefix("0.0.0.0/0")),
			p.ipBlock(netip.MustParsePrefix("::/0")),
		}
		return []networkingv1.NetworkPolicyEgressRule{{To: append(to, p.allowedLinkLocalPeers()...)}}
	}
	var rules []networkingv1.NetworkPolicyEgressRule
	if len(s.CIDRs) > 0 {
		// Never a rule with an empty "to": that would allow every destination.
		to := make([]networkingv1.NetworkPolicyPeer, 0, len(s.CIDRs))
		for _, c := range s.CIDRs {
			to = append(to, p.ipBlock(netip.MustParsePrefix(c)))
		}
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: to})
	}
	return append(rules, p.dnsRule())
}

// ipBlock allows pfx but the closed link-local ranges inside it.
func (p Peers) ipBlock(pfx netip.Prefix) networkingv1.NetworkPolicyPeer {
	b := &networkingv1.IPBlock{CIDR: pfx.String()}
	for _, ll := range LinkLocal {
		if ll != pfx && Within(ll, pfx) {
			b.Except = append(b.Except, ll.String())
		}
	}
	return networkingv1.NetworkPolicyPeer{IPBlock: b}
}

func (p Peers) allowedLinkLocalPeers() []networkingv1.NetworkPolicyPeer {
	out := make([]networkingv1.NetworkPolicyPeer, 0, len(p.AllowedLinkLocal))
	for _, a := range p.AllowedLinkLocal {
		out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: a.Masked().String()}})
	}
	return out
}

// dnsRule opens port 53 (UDP and TCP) to the cluster DNS pods and their Service's addresses
// (a policy may see the Service address before it is translated), and nowhere else.
func (p Peers) dnsRule() networkingv1.NetworkPolicyEgressRule {
	to := []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: p.DNSNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(p.DNSPodLabels)},
	}}
	for _, ip := range p.DNSServiceIPs {
		to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(ip, ip.BitLen()).String()}})
	}
	dns := intstr.FromInt32(egress.DNSPort)
	return networkingv1.NetworkPolicyEgressRule{To: to, Ports: []networkingv1.NetworkPolicyPort{
		{Protocol: ptr.To(corev1.ProtocolUDP), Port: &dns},
		{Protocol: ptr.To(corev1.ProtocolTCP), Port: &dns},
	}}
}
