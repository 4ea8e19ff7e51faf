package antispoof

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

const (
	// Family and Table hold every pod's rules; `devcluster down` deletes the table.
	Family = "bridge"
	Table  = "agent-sandbox-antispoof"
	// portsMap sends each frame, by the bridge port it came in on, to that pod's chain; a port
	// without an element (the host's own bridge traffic) passes.
	portsMap  = "ports"
	hookChain = "prerouting"
	// Before every other bridge hook (br_netfilter's iptables calls sit at 0), so no later
	// stage sees a forged frame.
	hookPriority = -400
)

// ChainName names the chain of one attachment (container ID and interface name, all DEL is
// sure to get), hashed so that any container ID makes a valid, short nft name.
func ChainName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return "pod-" + hex.EncodeToString(sum[:8])
}

// portRules are the rules of a pod's chain: drop what the pod may not send, in the order the
// headers come. The first carries the fingerprint CHECK compares.
func portRules(p Port) []string {
	v4, v6 := p.split()
	mac := p.MAC.String()
	types := []string{"ip", "arp"}
	if len(v4) == 0 {
		types = []string{} // no IPv4 address: neither IPv4 nor ARP
	}
	if len(v6) > 0 {
		types = append(types, "ip6")
	}
	// Everything else (VLAN tags, other protocols) would carry addresses we do not check.
	only := "drop"
	if len(types) > 0 {
		only = fmt.Sprintf("ether type != { %s } drop", strings.Join(types, ", "))
	}
	rules := []string{fmt.Sprintf("ether saddr != %s drop comment %q", mac, p.fingerprint()), only}
	if len(v4) > 0 {
		rules = append(rules,
			// Only Ethernet/IPv4 ARP, whose sender fields the next rules read.
			"arp htype != 1 drop", "arp ptype != ip drop", "arp hlen != 6 drop", "arp plen != 4 drop",
			fmt.Sprintf("arp saddr ether != %s drop", mac),
			fmt.Sprintf("arp saddr ip != { %s } drop", join(v4, netip.Addr.String)),
			fmt.Sprintf("ip saddr != { %s } drop", join(v4, netip.Addr.String)),
		)
	}
	if len(v6) > 0 {
		rules = append(rules,
			// Link-local sources for neighbour discovery; nobody is named by one.
			fmt.Sprintf("ip6 saddr != { %s, fe80::/10 } drop", join(v6, netip.Addr.String)),
			// A pod is no router: no router advertisements, no redirects.
			"icmpv6 type { nd-router-advert, nd-redirect } drop",
			// A neighbour advertisement (IPv6's ARP reply) may claim the pod's own addresses or
			// a link-local one: the target field is 8 bytes into the ICMPv6 header.
			"icmpv6 type nd-neighbor-advert @th,64,10 == 0x3fa accept",
			fmt.Sprintf("icmpv6 type nd-neighbor-advert @th,64,128 != { %s } drop", join(v6, hexAddr)),
		)
	}
	return rules
}

func hexAddr(a netip.Addr) string {
	b := a.As16()
	return "0x" + hex.EncodeToString(b[:])
}

func join(addrs []netip.Addr, f func(netip.Addr) string) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = f(a)
	}
	return strings.Join(s, ", ")
}

func obj(kind, name string) string { return fmt.Sprintf("%s %s %s %s", kind, Family, Table, name) }

// skeleton makes sure the table, the map and the hook chain with its one rule exist; `add` of
// an existing table, map or chain changes nothing.
func skeleton() []string {
	return []string{
		fmt.Sprintf("add table %s %s", Family, Table),
		"add " + obj("map", portsMap) + " { type ifname : verdict ; }",
		"add " + obj("chain", hookChain) + fmt.Sprintf(" { type filter hook prerouting priority %d ; policy accept ; }", hookPriority),
		"flush " + obj("chain", hookChain),
		"add " + obj("rule", hookChain) + " iifname vmap @" + portsMap,
	}
}

// unlink deletes the map elements that lead to chain or sit on veth, as far as the listing
// shows them (deleting an absent element would fail the whole transaction).
func unlink(l listing, chain, veth string) []string {
	var keys []string
	for k, target := range l.elems {
		if target == chain || k == veth {
			keys = append(keys, fmt.Sprintf("%q", k))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return []string{"delete " + obj("element", portsMap) + " { " + strings.Join(keys, ", ") + " }"}
}

// addScript replaces whatever the listing holds for chain or veth with the port's rules, in one
// nft transaction: the port is never without them once the element exists.
func addScript(l listing, chain string, p Port) string {
	lines := append(skeleton(), unlink(l, chain, p.Veth)...)
	lines = append(lines, "add "+obj("chain", chain), "flush "+obj("chain", chain))
	for _, r := range portRules(p) {
		lines = append(lines, "add "+obj("rule", chain)+" "+r)
	}
	lines = append(lines, fmt.Sprintf("add %s { %q : jump %s }", obj("element", portsMap), p.Veth, chain))
	return strings.Join(lines, "\n") + "\n"
}

// delScript removes what the listing holds for chain (empty when there is nothing).
func delScript(l listing, chain string) string {
	lines := unlink(l, chain, "")
	if l.chains[chain] {
		lines = append(lines, "flush "+obj("chain", chain), "delete "+obj("chain", chain))
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}
