package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/manager"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// parseNetworkFlags reads --dns-pod-labels, --dns-service-ips and --egress-allowed-link-local.
func parseNetworkFlags(opts *manager.Options, dnsLabels, dnsIPs, linkLocal string) error {
	var err error
	if opts.Network.DNSPodLabels, err = parseLabels(dnsLabels); err != nil {
		return fmt.Errorf("--dns-pod-labels: %w", err)
	}
	for _, s := range splitComma(dnsIPs) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return fmt.Errorf("--dns-service-ips: %q is not an IP address", s)
		}
		opts.Network.DNSServiceIPs = append(opts.Network.DNSServiceIPs, a)
	}
	for _, s := range splitComma(linkLocal) {
		c, err := egress.ParseCIDR(s)
		if err != nil {
			return fmt.Errorf("--egress-allowed-link-local: %w", err)
		}
		p := netip.MustParsePrefix(c)
		if !egresspolicy.InLinkLocal(p) {
			return fmt.Errorf("--egress-allowed-link-local: %s is not inside %v", c, egresspolicy.LinkLocal)
		}
		opts.Network.AllowedLinkLocal = append(opts.Network.AllowedLinkLocal, p)
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
