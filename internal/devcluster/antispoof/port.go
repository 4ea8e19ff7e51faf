// Package antispoof is the local cluster's CNI plugin (`agent-sandbox-antispoof`, binary
// cmd/cni-antispoof) that keeps a pod from sending as another: chained after the bridge plugin,
// it gives the pod's host-side veth nftables rules (a bridge-family table of its own) that drop
// every frame whose Ethernet source is not the pod's MAC, whose IPv4/IPv6 source is not one of
// the pod's addresses, and every ARP whose sender is not the pod's IP and MAC. The router names
// tokenless callers by source IP (docs/security.md), so that address must be the sender's own.
package antispoof

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	current "github.com/containernetworking/cni/pkg/types/100"
)

// Port is one pod interface as the bridge plugin attached it: the host-side veth (a port of the
// bridge) and what the pod may send from it.
type Port struct {
	Veth string
	MAC  net.HardwareAddr
	IPs  []netip.Addr
}

// isBridgePort reports whether a host interface is enslaved to a bridge; the bridge plugin's
// result lists the bridge itself and the host veth, both without a sandbox.
var isBridgePort = func(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name, "brport"))
	return err == nil
}

// PortFromResult finds, in a previous plugin's result, the container interface ifName (its MAC
// and its addresses) and the host veth that is its bridge port.
func PortFromResult(res *current.Result, ifName string) (Port, error) {
	var p Port
	ctr := -1
	for i, iface := range res.Interfaces {
		switch {
		case iface.Sandbox != "" && iface.Name == ifName:
			ctr = i
		case iface.Sandbox == "" && isBridgePort(iface.Name):
			if p.Veth != "" {
				return Port{}, fmt.Errorf("prevResult lists two bridge ports, %s and %s", p.Veth, iface.Name)
			}
			p.Veth = iface.Name
		}
	}
	if ctr < 0 {
		return Port{}, fmt.Errorf("prevResult has no container interface %q", ifName)
	}
	if p.Veth == "" {
		return Port{}, errors.New("prevResult names no host veth on a bridge (is this plugin chained after bridge?)")
	}
	mac, err := net.ParseMAC(res.Interfaces[ctr].Mac)
	if err != nil || len(mac) != 6 {
		return Port{}, fmt.Errorf("container interface %q has no Ethernet MAC in prevResult (%q)", ifName, res.Interfaces[ctr].Mac)
	}
	p.MAC = mac
	for _, ip := range res.IPs {
		if ip.Interface == nil || *ip.Interface != ctr {
			continue
		}
		a, ok := netip.AddrFromSlice(ip.Address.IP)
		if !ok {
			return Port{}, fmt.Errorf("bad address %v in prevResult", ip.Address.IP)
		}
		p.IPs = append(p.IPs, a.Unmap())
	}
	if len(p.IPs) == 0 {
		return Port{}, fmt.Errorf("prevResult gives container interface %q no address", ifName)
	}
	return p, nil
}

// split returns the port's IPv4 and IPv6 addresses.
func (p Port) split() (v4, v6 []netip.Addr) {
	for _, a := range p.IPs {
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	return v4, v6
}

// fingerprint says what the rules allow; CHECK compares it with the chain's comment. Hashed:
// nft keeps comments to 128 bytes, and a pod may have several IPv6 addresses.
func (p Port) fingerprint() string {
	s := p.Veth + " " + p.MAC.String()
	for _, a := range p.IPs {
		s += " " + a.String()
	}
	sum := sha256.Sum256([]byte(s))
	return "agent-sandbox antispoof " + p.Veth + " " + hex.EncodeToString(sum[:6])
}
