// Package egress is the public contract of a Sandbox's egress annotations (the agent harness's network
// modes: allow-all, deny-all, restricted to CIDRs and domain names): their parsing and validation, the
// annotations that ask for a mode, and the EgressPolicy condition message that says it is in
// force. The SDK and sbx write the annotations with it and the controller reads them with it, so
// client and controller agree on what is valid; the controller's NetworkPolicy that enforces a
// mode is internal. The annotation names and mode values themselves are API constants in
// api/v1alpha1.
package egress

import (
	"fmt"
	"net/netip"
	"strings"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// The modes, as written in the agents.x-k8s.io/egress annotation.
const (
	AllowAll   = agentsv1alpha1.EgressAllowAll
	DenyAll    = agentsv1alpha1.EgressDenyAll
	Restricted = agentsv1alpha1.EgressRestricted
)

// DNSPort is kept open, over UDP and TCP, in restricted mode.
const DNSPort = 53

// Spec is a valid egress mode and, for restricted, the destinations it allows.
type Spec struct {
	Mode string
	// CIDRs are canonical prefixes ("10.0.0.0/8", "2001:db8::/32"), without duplicates, in the
	// order given; set only for restricted.
	CIDRs []string
	// Domains are canonical names and one-label wildcards ("pypi.org", "*.github.com"), without
	// duplicates, in the order given; set only for restricted (WithDomains).
	Domains []string
	// DomainsFailOpen lets the pod run, with egress open to everything allow-all allows, where
	// the cluster cannot enforce Domains.
	DomainsFailOpen bool
}

// WithDomains returns s, a restricted spec, allowing the names too (see ParseDomains).
func (s Spec) WithDomains(domains []string, failOpen bool) (Spec, error) {
	if s.Mode != Restricted {
		return Spec{}, fmt.Errorf("egress %s takes no domains (got %s); domains belong to %s", s.Mode, strings.Join(domains, ","), Restricted)
	}
	canon, err := ParseDomains(domains)
	if err != nil {
		return Spec{}, err
	}
	s.Domains, s.DomainsFailOpen = canon, failOpen && len(canon) > 0
	return s, nil
}

// New validates mode and cidrs and returns them in canonical form. CIDRs are allowed only with
// restricted, where an empty list allows DNS alone; a bare address means that one host.
func New(mode string, cidrs []string) (Spec, error) {
	switch mode {
	case AllowAll, DenyAll:
		if len(cidrs) > 0 {
			return Spec{}, fmt.Errorf("egress %s takes no CIDRs (got %s); CIDRs belong to %s", mode, strings.Join(cidrs, ","), Restricted)
		}
		return Spec{Mode: mode}, nil
	case Restricted:
		canon, err := ParseCIDRs(cidrs)
		if err != nil {
			return Spec{}, err
		}
		return Spec{Mode: mode, CIDRs: canon}, nil
	case "":
		return Spec{}, fmt.Errorf("egress mode is empty; want %s, %s or %s", AllowAll, DenyAll, Restricted)
	}
	return Spec{}, fmt.Errorf("unknown egress mode %q; want %s, %s or %s", mode, AllowAll, DenyAll, Restricted)
}

// ParseCIDRs validates each entry (see ParseCIDR) and drops duplicates.
func ParseCIDRs(cidrs []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, c := range cidrs {
		p, err := ParseCIDR(c)
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// ParseCIDR returns the canonical form of one IPv4 or IPv6 CIDR. A bare address is that host
// (/32 or /128). A prefix with host bits set ("10.0.0.1/8") is refused rather than guessed at.
func ParseCIDR(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("empty egress CIDR")
	}
	if !strings.Contains(s, "/") {
		addr, err := netip.ParseAddr(s)
		if err != nil || addr.Zone() != "" {
			return "", fmt.Errorf("egress CIDR %q is neither a CIDR (like 10.0.0.0/8) nor an IP address", s)
		}
		if addr.Is4In6() {
			return "", fmt.Errorf("egress CIDR %q: write IPv4 addresses as IPv4 (%s)", s, addr.Unmap())
		}
		return netip.PrefixFrom(addr, addr.BitLen()).String(), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return "", fmt.Errorf("egress CIDR %q is not a valid CIDR (like 10.0.0.0/8 or 2001:db8::/32)", s)
	}
	if p.Addr().Is4In6() {
		return "", fmt.Errorf("egress CIDR %q: write IPv4 networks as IPv4", s)
	}
	if m := p.Masked(); m != p {
		return "", fmt.Errorf("egress CIDR %q has host bits set; the network is %s", s, m)
	}
	return p.String(), nil
}

// SplitList splits an egress-cidrs or egress-domains annotation value at commas and white space.
func SplitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(listSeparators, r) })
}

// listSeparators separate the entries of a list annotation.
const listSeparators = ", \t\n\r"

// FromAnnotations reads a Sandbox's egress annotations. requested is false when none of the
// mode, CIDR and domain annotations is set: the Sandbox asks for nothing and gets no policy. The
// lists are read only for restricted; a list without a mode is an error, since leaving egress
// open is surely not what was meant.
func FromAnnotations(annotations map[string]string) (spec Spec, requested bool, err error) {
	mode, hasMode := annotations[agentsv1alpha1.EgressAnnotation]
	list, hasList := annotations[agentsv1alpha1.EgressCIDRsAnnotation]
	domains, hasDomains := annotations[agentsv1alpha1.EgressDomainsAnnotation]
	if !hasMode && !hasList && !hasDomains {
		return Spec{}, false, nil
	}
	if !hasMode {
		given := agentsv1alpha1.EgressCIDRsAnnotation
		if !hasList {
			given = agentsv1alpha1.EgressDomainsAnnotation
		}
		return Spec{}, true, fmt.Errorf("annotation %s is set but %s is not; add %s: %s",
			given, agentsv1alpha1.EgressAnnotation, agentsv1alpha1.EgressAnnotation, Restricted)
	}
	if mode != Restricted {
		// The lists mean nothing to the other modes; a leftover one does not matter.
		if spec, err = New(mode, nil); err != nil {
			return Spec{}, true, fmt.Errorf("annotation %s: %w", agentsv1alpha1.EgressAnnotation, err)
		}
		return spec, true, nil
	}
	if spec, err = New(mode, SplitList(list)); err != nil {
		return Spec{}, true, fmt.Errorf("annotation %s: %w", agentsv1alpha1.EgressCIDRsAnnotation, err)
	}
	failOpen, err := parseFailOpen(annotations)
	if err != nil {
		return Spec{}, true, err
	}
	if spec, err = spec.WithDomains(SplitList(domains), failOpen); err != nil {
		return Spec{}, true, fmt.Errorf("annotation %s: %w", agentsv1alpha1.EgressDomainsAnnotation, err)
	}
	return spec, true, nil
}

// Annotations are the Sandbox annotations that ask for spec. For modes other than restricted,
// and for restricted without CIDRs (domains), the CIDR (domain) annotation is absent.
func (s Spec) Annotations() map[string]string {
	a := map[string]string{agentsv1alpha1.EgressAnnotation: s.Mode}
	if s.Mode != Restricted {
		return a
	}
	if len(s.CIDRs) > 0 {
		a[agentsv1alpha1.EgressCIDRsAnnotation] = strings.Join(s.CIDRs, ",")
	}
	if len(s.Domains) > 0 {
		a[agentsv1alpha1.EgressDomainsAnnotation] = strings.Join(s.Domains, ",")
	}
	if s.DomainsFailOpen {
		a[agentsv1alpha1.EgressDomainsFailOpenAnnotation] = "true"
	}
	return a
}

// Summary names the mode with its CIDRs and domains: "deny-all", "allow-all", "restricted to
// 10.0.0.0/8,1.2.3.4/32", "restricted to 10.0.0.0/8 and pypi.org,*.github.com", "restricted
// to pypi.org (fail-open)", "restricted to DNS only".
func (s Spec) Summary() string {
	var to []string
	if len(s.CIDRs) > 0 {
		to = append(to, strings.Join(s.CIDRs, ","))
	}
	if len(s.Domains) > 0 {
		to = append(to, strings.Join(s.Domains, ","))
	}
	switch {
	case s.Mode != Restricted:
		return s.Mode
	case len(to) == 0:
		return "restricted to DNS only"
	case s.DomainsFailOpen:
		return "restricted to " + strings.Join(to, " and ") + " (fail-open)"
	}
	return "restricted to " + strings.Join(to, " and ")
}

// AppliedMessage is the EgressPolicy condition's message once spec is in force through the
// NetworkPolicy called policy. It starts with Summary and a colon, which Applied checks.
func (s Spec) AppliedMessage(policy string) string {
	switch s.Mode {
	case AllowAll:
		return s.Summary() + fmt.Sprintf(": NetworkPolicy %s allows egress anywhere but link-local addresses (cloud metadata) an admin has not opened", policy)
	case DenyAll:
		return s.Summary() + fmt.Sprintf(": NetworkPolicy %s allows no egress, DNS included", policy)
	}
	msg := s.Summary() + fmt.Sprintf(": NetworkPolicy %s allows egress to these CIDRs and DNS (UDP and TCP port %d) to the cluster DNS only", policy, DNSPort)
	if len(s.Domains) > 0 {
		msg += fmt.Sprintf("; CiliumNetworkPolicy %s allows these names, as Cilium's DNS proxy resolves them", policy)
	}
	return msg
}

// FailOpenMessage is the EgressPolicy condition's message when the cluster cannot enforce
// spec's domains and spec asked for fail-open: the pod runs under allow-all's policy. It starts
// like AppliedMessage, which asked for exactly this.
func (s Spec) FailOpenMessage(policy string) string {
	return s.Summary() + fmt.Sprintf(": this cluster cannot enforce domain names (no CiliumNetworkPolicy API when the controller started), "+
		"so, as fail-open asks, NetworkPolicy %s allows egress anywhere but link-local addresses (cloud metadata) an admin has not opened", policy)
}

// Applied reports whether an EgressPolicy condition message says spec is in force.
func (s Spec) Applied(message string) bool {
	return strings.HasPrefix(message, s.Summary()+":")
}
