package egress

import (
	"fmt"
	"net/netip"
	"strings"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// Limits of a domain list. The API server's admission policy (config/admission/egress_domains.yaml)
// checks the same rules, so a list it accepts is one the controller accepts.
const (
	// MaxDomains is the longest list a Sandbox or template may carry.
	MaxDomains = 64
	// MaxDomainLength is the longest name, without a trailing dot (RFC 1035's 255 octets on the
	// wire less the length bytes).
	MaxDomainLength = 253
	// MaxLabelLength is the longest label of a name.
	MaxLabelLength = 63
	// wildcardPrefix is the one wildcard a list may use: a whole first label.
	wildcardPrefix = "*."
)

// ParseDomains validates each entry (see ParseDomain), drops duplicates and keeps the order.
func ParseDomains(names []string) ([]string, error) {
	if len(names) > MaxDomains {
		return nil, fmt.Errorf("%d egress domains; a list holds at most %d", len(names), MaxDomains)
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		d, err := ParseDomain(n)
		if err != nil {
			return nil, err
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out, nil
}

// ParseDomain returns the canonical form of one entry of a domain list: lower case, without a
// trailing dot. An entry is a DNS name ("pypi.org") or a name below a domain whose first label
// is a wildcard ("*.github.com": api.github.com, not github.com itself nor a.b.github.com).
// Addresses, a bare "*", wildcards anywhere else, and names no DNS server could hold are refused.
func ParseDomain(s string) (string, error) {
	// ASCII only, as the admission policy's CEL does: a non-ASCII letter is refused below rather
	// than folded into an ASCII one (the Kelvin sign is a "k" to strings.ToLower).
	name := strings.TrimSuffix(lowerASCII(strings.Trim(s, listSeparators)), ".")
	switch {
	case name == "":
		return "", fmt.Errorf("empty egress domain")
	case isAddress(name):
		return "", fmt.Errorf("egress domain %q is an IP address; put addresses in %s", s, agentsv1alpha1.EgressCIDRsAnnotation)
	case name == "*":
		return "", fmt.Errorf("egress domain %q would allow every name; list the names, or use egress %s", s, AllowAll)
	}
	base, wildcard := strings.CutPrefix(name, wildcardPrefix)
	if strings.Contains(base, "*") {
		return "", fmt.Errorf("egress domain %q: a wildcard may only be the whole first label (*.example.com)", s)
	}
	if len(name) > MaxDomainLength {
		return "", fmt.Errorf("egress domain %q is %d characters long; a name has at most %d", s, len(name), MaxDomainLength)
	}
	labels := strings.Split(base, ".")
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return "", fmt.Errorf("egress domain %q: %w", s, err)
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return "", fmt.Errorf("egress domain %q ends in a numeric label; it is not a host name", s)
	}
	if wildcard && len(labels) < 2 {
		return "", fmt.Errorf("egress domain %q: a wildcard needs two labels or more after it (*.example.com, not *.com)", s)
	}
	return name, nil
}

// lowerASCII lower-cases A-Z and leaves every other byte as it is.
func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// IsWildcard reports whether a canonical entry is a wildcard ("*.example.com").
func IsWildcard(domain string) bool { return strings.HasPrefix(domain, wildcardPrefix) }

// checkLabel: 1 to 63 letters, digits, '-' and '_' (as Cilium's toFQDNs takes them), neither
// first nor last a '-'.
func checkLabel(l string) error {
	switch {
	case l == "":
		return fmt.Errorf("an empty label (two dots in a row, or a leading dot)")
	case len(l) > MaxLabelLength:
		return fmt.Errorf("label %q is %d characters long; a label has at most %d", l, len(l), MaxLabelLength)
	case l[0] == '-' || l[len(l)-1] == '-':
		return fmt.Errorf("label %q starts or ends with '-'", l)
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("label %q holds %q; a name is letters, digits, '-' and '_' (internationalized names in punycode, xn--…)", l, r)
		}
	}
	return nil
}

// isAddress: an IP address or a CIDR, which belong in the CIDR list.
func isAddress(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	_, err := netip.ParsePrefix(s)
	return err == nil
}

// parseFailOpen reads EgressDomainsFailOpenAnnotation: absent or "false" is fail-closed.
func parseFailOpen(annotations map[string]string) (bool, error) {
	switch v, ok := annotations[agentsv1alpha1.EgressDomainsFailOpenAnnotation]; {
	case !ok || v == "false":
		return false, nil
	case v == "true":
		return true, nil
	default:
		return false, fmt.Errorf("annotation %s: %q is neither \"true\" nor \"false\"", agentsv1alpha1.EgressDomainsFailOpenAnnotation, v)
	}
}

// TemplateDomains reads a SandboxTemplate's domain list and its fail-open choice; no list (nil)
// leaves the template's egress as it was.
func TemplateDomains(annotations map[string]string) (domains []string, failOpen bool, err error) {
	list, ok := annotations[agentsv1alpha1.EgressDomainsAnnotation]
	if !ok {
		return nil, false, nil
	}
	if domains, err = ParseDomains(SplitList(list)); err != nil {
		return nil, false, fmt.Errorf("annotation %s: %w", agentsv1alpha1.EgressDomainsAnnotation, err)
	}
	if len(domains) == 0 {
		return nil, false, fmt.Errorf("annotation %s is empty; list host names (pypi.org,*.github.com) or remove it",
			agentsv1alpha1.EgressDomainsAnnotation)
	}
	if failOpen, err = parseFailOpen(annotations); err != nil {
		return nil, false, err
	}
	return domains, failOpen, nil
}
