package hostnet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/antispoof"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// GuardChain holds the one rule that keeps pods off the world: traffic forwarded from the pod
// bridge out of an interface with a default route is dropped. Pods still reach this machine's
// addresses, the pod network, and other local networks (tests add network namespaces as
// "external" hosts); nothing is masqueraded.
const GuardChain = "SBXDEV-FORWARD"

// Chain prefixes of the cluster: kube-proxy and the kubelet (KUBE-), the CNI bridge plugin
// (CNI-), Cilium (CILIUM_) and our forward guard (SBXDEV-).
var chainPrefixes = []string{"KUBE-", "CNI-", "CILIUM_", "SBXDEV-"}

// IsOurChain reports whether a chain has one of the cluster's prefixes.
func IsOurChain(ch string) bool {
	for _, p := range chainPrefixes {
		if strings.HasPrefix(ch, p) {
			return true
		}
	}
	return false
}

// Netfilter records the iptables chains and nft tables there were, then adds GuardChain. Down
// removes every chain with our prefixes that was not there before (kube-proxy's, the kubelet's,
// the CNI plugins', Cilium's, ours) with the rules that jump to them, the anti-spoofing
// plugin's nft table (AntispoofTable) with whatever pod chains it still holds, and the nft
// tables that appeared and hold no rule (iptables-nft leaves Cilium's `ip raw` behind).
type Netfilter struct{ Env }

type netfilterRecord struct {
	Chains    map[string][]string `json:"chains"` // "iptables/nat" -> chains
	NftTables []string            `json:"nftTables"`
}

func (Netfilter) Name() string { return "netfilter" }

func (s Netfilter) Up(context.Context) error {
	_, ok, err := load[netfilterRecord](s.Env, s.Name())
	if err != nil {
		return err
	}
	if !ok {
		rec := netfilterRecord{Chains: map[string][]string{}, NftTables: nftTables(s.Host)}
		for _, key := range iptablesTables(s.Host) {
			rec.Chains[key] = chainsOf(s.Host, key)
		}
		if err := s.Store.Save(s.Name(), rec); err != nil {
			return err
		}
	}
	return s.ensureGuard()
}

func (s Netfilter) Down(context.Context) error {
	rec, ok, err := load[netfilterRecord](s.Env, s.Name())
	if !ok || err != nil {
		return err
	}
	var errs []error
	for _, key := range iptablesTables(s.Host) {
		// A table not in the record had none of our chains before.
		if err := removeChains(s.Host, key, ourChains(s.Host, key, rec.Chains[key])); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	errs = append(errs, removeAntispoofTable(s.Host), removeEmptyNftTables(s.Host, rec.NftTables))
	return finish(s.Env, s.Name(), errors.Join(errs...))
}

func defaultRouteDevs(h host.Host) []string {
	out, _ := h.Run("ip", "-o", "route", "show", "default")
	var devs []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "dev" && f[i+1] != spec.BridgeName && !slices.Contains(devs, f[i+1]) {
				devs = append(devs, f[i+1])
			}
		}
	}
	return devs
}

// ensureGuard (re)writes GuardChain and puts the jump to it first in FORWARD.
func (s Netfilter) ensureGuard() error {
	ipt := func(args ...string) error {
		_, err := s.Host.Run("iptables", append([]string{"-w", "-t", "filter"}, args...)...)
		return err
	}
	if ipt("-S", GuardChain) != nil {
		if err := ipt("-N", GuardChain); err != nil {
			return err
		}
	}
	if err := ipt("-F", GuardChain); err != nil {
		return err
	}
	for _, dev := range defaultRouteDevs(s.Host) {
		if err := ipt("-A", GuardChain, "-i", spec.BridgeName, "-o", dev, "-j", "DROP",
			"-m", "comment", "--comment", "agent-sandbox dev: pods do not reach the world"); err != nil {
			return err
		}
	}
	if ipt("-C", "FORWARD", "-j", GuardChain) == nil {
		return nil
	}
	return ipt("-I", "FORWARD", "1", "-j", GuardChain)
}

func iptablesTables(h host.Host) []string {
	var out []string
	// kubelet may use either backend; chains are only ever removed if they were not there before.
	for _, bin := range []string{"iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy"} {
		if !h.Has(bin) {
			continue
		}
		for _, t := range []string{"filter", "nat", "mangle", "raw"} {
			out = append(out, bin+"/"+t)
		}
	}
	return out
}

func chainsOf(h host.Host, key string) []string {
	bin, table, _ := strings.Cut(key, "/")
	out, err := h.Run(bin, "-w", "-t", table, "-S")
	if err != nil {
		return nil
	}
	var chains []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "-N" {
			chains = append(chains, f[1])
		}
	}
	return chains
}

// ourChains lists the chains of a table with our prefixes that were not there before.
func ourChains(h host.Host, key string, before []string) []string {
	var out []string
	for _, ch := range chainsOf(h, key) {
		if !slices.Contains(before, ch) && IsOurChain(ch) {
			out = append(out, ch)
		}
	}
	return out
}

// removeChains deletes the rules that jump to our chains, then flushes and deletes the chains.
func removeChains(h host.Host, key string, chains []string) error {
	if len(chains) == 0 {
		return nil
	}
	bin, table, _ := strings.Cut(key, "/")
	out, err := h.Run(bin, "-w", "-t", table, "-S")
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range strings.Split(out, "\n") {
		f := SplitRule(l)
		if len(f) < 2 || f[0] != "-A" || slices.Contains(chains, f[1]) {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if (f[i] == "-j" || f[i] == "-g") && slices.Contains(chains, f[i+1]) {
				// -S prints rules in the syntax -D accepts.
				if _, err := h.Run(bin, append([]string{"-w", "-t", table, "-D"}, f[1:]...)...); err != nil {
					errs = append(errs, err)
				}
				break
			}
		}
	}
	for _, op := range []string{"-F", "-X"} {
		for _, ch := range chains {
			if _, err := h.Run(bin, "-w", "-t", table, op, ch); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// SplitRule splits a line of `iptables -S` into arguments: fields separated by spaces, where a
// double-quoted field (a comment) may hold spaces and backslash-escaped quotes.
func SplitRule(line string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\\' && inQuote && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case ch == '"':
			inQuote, have = !inQuote, true
		case ch == ' ' && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// nftTables lists "family name" of every nft table (nil when nft is not installed).
func nftTables(h host.Host) []string {
	out, err := h.Run("nft", "list", "tables")
	if err != nil {
		return nil
	}
	tables := []string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "table" {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	return tables
}

// AntispoofTable is the nft table ("family name") of our anti-spoofing CNI plugin
// (internal/devcluster/antispoof); only that plugin writes it.
var AntispoofTable = antispoof.Family + " " + antispoof.Table

// removeAntispoofTable deletes the plugin's table: the pods are gone, and a pod's DEL leaves the
// table's skeleton behind.
func removeAntispoofTable(h host.Host) error {
	if !slices.Contains(nftTables(h), AntispoofTable) {
		return nil
	}
	_, err := h.Run("nft", "delete", "table", antispoof.Family, antispoof.Table)
	return err
}

// removeEmptyNftTables deletes the nft tables that were not there before and hold no rules.
func removeEmptyNftTables(h host.Host, before []string) error {
	if before == nil {
		return nil // not recorded: nothing is known to be ours
	}
	var errs []error
	for _, t := range nftTables(h) {
		if slices.Contains(before, t) {
			continue
		}
		fam, name, _ := strings.Cut(t, " ")
		out, err := h.Run("nft", "list", "table", fam, name)
		if err != nil || HasNftRules(out) {
			continue
		}
		_, err = h.Run("nft", "delete", "table", fam, name)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// HasNftRules reports whether `nft list table` output holds a rule, not just chain headers.
func HasNftRules(listing string) bool {
	for _, l := range strings.Split(listing, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || t == "}" || strings.HasPrefix(t, "table ") || strings.HasPrefix(t, "chain ") ||
			strings.HasPrefix(t, "type ") || strings.HasPrefix(t, "policy ") {
			continue
		}
		return true
	}
	return false
}
