package antispoof

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
)

// bridgeResult is the bridge plugin's result shape: the bridge, the host veth, the container's
// interface, and addresses on it.
func bridgeResult(ctrMAC string, ips ...string) *current.Result {
	two := 2
	res := &current.Result{Interfaces: []*current.Interface{
		{Name: "sbxdev0", Mac: "aa:aa:aa:aa:aa:aa"},
		{Name: "veth1234", Mac: "bb:bb:bb:bb:bb:bb"},
		{Name: "eth0", Mac: ctrMAC, Sandbox: "/var/run/netns/cni-1"},
	}}
	for _, ip := range ips {
		p := netip.MustParsePrefix(ip)
		res.IPs = append(res.IPs, &current.IPConfig{Interface: &two, Address: net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}})
	}
	return res
}

func TestPortFromResult(t *testing.T) {
	defer func(f func(string) bool) { isBridgePort = f }(isBridgePort)
	isBridgePort = func(name string) bool { return strings.HasPrefix(name, "veth") }
	noVeth := bridgeResult("02:00:00:00:00:01", "10.244.0.5/16")
	noVeth.Interfaces[1].Name = "other0"
	otherIface := bridgeResult("02:00:00:00:00:01", "10.244.0.5/16")
	otherIface.IPs[0].Interface = new(int)
	for _, tc := range []struct {
		name    string
		res     *current.Result
		want    string // Port as "veth mac ips", or the error's start
		wantErr bool
	}{
		{"IPv4 pod", bridgeResult("02:00:00:00:00:01", "10.244.0.5/16"), "veth1234 02:00:00:00:00:01 [10.244.0.5]", false},
		{"dual-stack pod", bridgeResult("02:00:00:00:00:01", "10.244.0.5/16", "fd00::5/64"), "veth1234 02:00:00:00:00:01 [10.244.0.5 fd00::5]", false},
		{"no container interface eth0", &current.Result{}, "prevResult has no container interface", true},
		{"no bridge port", noVeth, "prevResult names no host veth", true},
		{"no MAC", bridgeResult("", "10.244.0.5/16"), "container interface \"eth0\" has no Ethernet MAC", true},
		{"address on another interface only", otherIface, "prevResult gives container interface \"eth0\" no address", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PortFromResult(tc.res, "eth0")
			if tc.wantErr {
				if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
					t.Fatalf("error %v, want one starting %q", err, tc.want)
				}
				return
			}
			if got := fmt.Sprintf("%s %s %v", p.Veth, p.MAC, p.IPs); got != tc.want || err != nil {
				t.Fatalf("port %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func port(ips ...string) Port {
	p := Port{Veth: "veth1234", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	for _, ip := range ips {
		p.IPs = append(p.IPs, netip.MustParseAddr(ip))
	}
	return p
}

func TestPortRules(t *testing.T) {
	for _, tc := range []struct {
		name          string
		port          Port
		want, notWant []string
	}{
		{"IPv4 pod: its MAC, IPv4 source and ARP sender; no IPv6", port("10.244.0.5"),
			[]string{"ether saddr != 02:00:00:00:00:01 drop", "ether type != { ip, arp } drop", "arp saddr ether != 02:00:00:00:00:01 drop",
				"arp saddr ip != { 10.244.0.5 } drop", "ip saddr != { 10.244.0.5 } drop", "arp htype != 1 drop"},
			[]string{"ip6", "icmpv6"}},
		{"dual-stack pod: neighbour advertisements only for its own or link-local targets", port("10.244.0.5", "fd00::5"),
			[]string{"ether type != { ip, arp, ip6 } drop", "ip6 saddr != { fd00::5, fe80::/10 } drop",
				"icmpv6 type { nd-router-advert, nd-redirect } drop",
				"icmpv6 type nd-neighbor-advert @th,64,128 != { 0xfd000000000000000000000000000005 } drop"}, nil},
		{"IPv6-only pod: no IPv4, no ARP", port("fd00::5"), []string{"ether type != { ip6 } drop"}, []string{"arp", "ip saddr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := portRules(tc.port)
			all := strings.Join(rules, "\n")
			for _, w := range tc.want {
				if !slices.ContainsFunc(rules, func(r string) bool { return strings.HasPrefix(r, w) }) {
					t.Errorf("no rule %q in\n%s", w, all)
				}
			}
			for _, nw := range tc.notWant {
				if strings.Contains(all, nw) {
					t.Errorf("a rule mentions %q:\n%s", nw, all)
				}
			}
			if !strings.Contains(rules[0], `comment "`+tc.port.fingerprint()+`"`) {
				t.Errorf("first rule %q lacks the fingerprint", rules[0])
			}
		})
	}
}

func TestScripts(t *testing.T) {
	chain := ChainName("ctr1", "eth0")
	empty := listing{elems: map[string]string{}, chains: map[string]bool{}}
	stale := listing{elems: map[string]string{"veth1234": "pod-old", "veth9": chain}, chains: map[string]bool{chain: true, "pod-old": true}}
	for _, tc := range []struct {
		name          string
		script        string
		want, notWant []string
	}{
		{"ADD on an empty table creates it and links the veth last", addScript(empty, chain, port("10.244.0.5")),
			[]string{"add table bridge agent-sandbox-antispoof\n", "iifname vmap @ports\n", "add chain bridge agent-sandbox-antispoof " + chain + "\nflush chain",
				"add element bridge agent-sandbox-antispoof ports { \"veth1234\" : jump " + chain + " }\n"},
			[]string{"delete"}},
		{"ADD replaces a stale element on the veth and the attachment's old links", addScript(stale, chain, port("10.244.0.5")),
			[]string{`delete element bridge agent-sandbox-antispoof ports { "veth1234", "veth9" }`}, []string{"delete chain"}},
		{"DEL with nothing there does nothing", delScript(empty, chain), nil, []string{"delete", "flush"}},
		{"DEL removes the attachment's links and chain only", delScript(stale, chain),
			[]string{`delete element bridge agent-sandbox-antispoof ports { "veth9" }`, "delete chain bridge agent-sandbox-antispoof " + chain},
			[]string{"veth1234", "pod-old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range tc.want {
				if !strings.Contains(tc.script, w) {
					t.Errorf("script lacks %q:\n%s", w, tc.script)
				}
			}
			for _, nw := range tc.notWant {
				if strings.Contains(tc.script, nw) {
					t.Errorf("script has %q:\n%s", nw, tc.script)
				}
			}
		})
	}
	if got := ChainName("ctr1", "eth0"); got == ChainName("ctr1", "eth1") || got == ChainName("ctr2", "eth0") || len(got) > 32 {
		t.Errorf("chain names must differ per attachment and stay short: %q", got)
	}
}

// listingJSON is `nft -j list table bridge agent-sandbox-antispoof` (nft 1.0.6) with one pod.
func listingJSON(chain, comment string, rules int) string {
	s := `{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
{"table": {"family": "bridge", "name": "agent-sandbox-antispoof", "handle": 2}},
{"map": {"family": "bridge", "name": "ports", "table": "agent-sandbox-antispoof", "type": "ifname", "handle": 3, "map": "verdict",
  "elem": [["veth1234", {"jump": {"target": "` + chain + `"}}]]}},
{"chain": {"family": "bridge", "table": "agent-sandbox-antispoof", "name": "prerouting", "handle": 1, "type": "filter", "hook": "prerouting", "prio": -400, "policy": "accept"}},
{"chain": {"family": "bridge", "table": "agent-sandbox-antispoof", "name": "` + chain + `", "handle": 2}},
{"rule": {"family": "bridge", "table": "agent-sandbox-antispoof", "chain": "prerouting", "handle": 4, "expr": []}}`
	for i := range rules {
		c := ""
		if i == 0 {
			c = `"comment": "` + comment + `", `
		}
		s += `,
{"rule": {"family": "bridge", "table": "agent-sandbox-antispoof", "chain": "` + chain + `", "handle": 5, ` + c + `"expr": [{"drop": null}]}}`
	}
	return s + "]}"
}

func fakeNft(tables, listing string) runner {
	return func(stdin string, args ...string) (string, error) {
		switch strings.Join(args, " ") {
		case "list tables bridge":
			return tables, nil
		case "-j list table bridge agent-sandbox-antispoof":
			return listing, nil
		}
		return "", errors.New("unexpected nft " + strings.Join(args, " "))
	}
}

func TestVerify(t *testing.T) {
	chain, p := ChainName("ctr1", "eth0"), port("10.244.0.5")
	n, fp := len(portRules(p)), p.fingerprint()
	ours := "table bridge agent-sandbox-antispoof\n"
	for _, tc := range []struct {
		name, tables, listing string
		wantErr               string
	}{
		{"rules as ADD left them", ours, listingJSON(chain, fp, n), ""},
		{"no table", "", "", "veth veth1234 leads to chain \"\""},
		{"a rule missing", ours, listingJSON(chain, fp, n-1), "holds " + strconv.Itoa(n-1) + " rules"},
		{"rules of another address", ours, listingJSON(chain, port("10.244.0.6").fingerprint(), n), "is for"},
		{"veth leads elsewhere", ours, listingJSON("pod-other", fp, n), "leads to chain \"pod-other\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verify(fakeNft(tc.tables, tc.listing), chain, p)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("verify: %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}
