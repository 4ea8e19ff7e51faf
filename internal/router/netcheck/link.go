package netcheck

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"
)

// linkInfo is what the check learns of the pod's interface.
type linkInfo struct {
	name       string
	index      int
	mac        net.HardwareAddr
	own        netip.Prefix
	gateway    netip.Addr
	gatewayMAC net.HardwareAddr
}

// discover reads the interface's IPv4 address, the default gateway through it and the
// gateway's MAC (resolving it with an ordinary datagram when the neighbour table lacks it).
func discover(ctx context.Context, name string) (linkInfo, error) {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return linkInfo{}, fmt.Errorf("interface %s: %w", name, err)
	}
	l := linkInfo{name: name, index: iface.Index, mac: iface.HardwareAddr}
	if len(l.mac) != 6 {
		return l, fmt.Errorf("interface %s has no Ethernet address: the check needs an Ethernet pod interface", name)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return l, fmt.Errorf("addresses of %s: %w", name, err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			l.own = p
			break
		}
	}
	if !l.own.IsValid() {
		return l, fmt.Errorf("interface %s has no IPv4 address", name)
	}
	if l.gateway, err = defaultGateway("/proc/thread-self/net/route", name); err != nil {
		return l, err
	}
	l.gatewayMAC, err = resolveGateway(ctx, l.gateway, name)
	return l, err
}

// defaultGateway reads the IPv4 default route through iface from a /proc/net/route table.
func defaultGateway(table, iface string) (netip.Addr, error) {
	f, err := os.Open(table)
	if err != nil {
		return netip.Addr{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[0] != iface || fields[1] != "00000000" {
			continue
		}
		raw, err := hex.DecodeString(fields[2])
		if err != nil || len(raw) != 4 {
			continue
		}
		var ip [4]byte
		binary.LittleEndian.PutUint32(ip[:], binary.BigEndian.Uint32(raw))
		if gw := netip.AddrFrom4(ip); !gw.IsUnspecified() {
			return gw, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%w through %s in %s", errNoGateway, iface, table)
}

// resolveGateway returns the gateway's MAC from the neighbour table, first sending it one
// datagram (to the discard port) so that the kernel asks for it.
func resolveGateway(ctx context.Context, gw netip.Addr, iface string) (net.HardwareAddr, error) {
	if conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(gw, 9))); err == nil {
		_, _ = conn.Write([]byte{0})
		_ = conn.Close()
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if mac, ok := neighbour("/proc/thread-self/net/arp", gw, iface); ok {
			return mac, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the gateway %s never answered ARP on %s", gw, iface)
		case <-tick.C:
		}
	}
}

// neighbour looks ip up in a /proc/net/arp table: a complete entry (flags 0x2) on iface.
func neighbour(table string, ip netip.Addr, iface string) (net.HardwareAddr, bool) {
	data, err := os.ReadFile(table)
	if err != nil {
		return nil, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != ip.String() || f[5] != iface || f[2] != "0x2" {
			continue
		}
		if mac, err := net.ParseMAC(f[3]); err == nil {
			return mac, true
		}
	}
	return nil, false
}

// The tables are read through thread-self: a caller that moved one thread into the pod's
// network namespace (tests) reads that namespace's, as a process inside the pod does.
