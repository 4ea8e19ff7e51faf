package netcheck

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

func TestTheForgedSourceIsANeighbourNeverTheGatewayOrBroadcast(t *testing.T) {
	cases := []struct {
		name, own, gateway, want string
	}{
		{"the next address", "10.244.0.5/24", "10.244.0.1", "10.244.0.6"},
		{"skips the gateway", "10.244.0.5/24", "10.244.0.6", "10.244.0.7"},
		{"wraps before the broadcast address", "10.244.0.254/24", "10.244.0.1", "10.244.0.2"},
		{"a routed /32 pod borrows the next address", "10.0.3.17/32", "169.254.1.1", "10.0.3.18"},
		{"a /31 pairs with its peer", "10.0.3.16/31", "10.0.3.1", "10.0.3.17"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := forgedSource(netip.MustParsePrefix(c.own), netip.MustParseAddr(c.gateway))
			if got.String() != c.want {
				t.Errorf("forgedSource(%s, gateway %s) = %s, want %s", c.own, c.gateway, got, c.want)
			}
		})
	}
}

func writeTable(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "table")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTheDefaultGatewayIsReadFromTheRouteTable(t *testing.T) {
	const header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	cases := []struct {
		name, table, iface, want string
	}{
		{"default route through eth0", header + "eth0\t00000000\t0100F40A\t0003\t0\t0\t0\t00000000\t0\t0\t0\neth0\t0000F40A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", "eth0", "10.244.0.1"},
		{"another interface's default is not ours", header + "net1\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n", "eth0", ""},
		{"a link route has no gateway", header + "eth0\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n", "eth0", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := defaultGateway(writeTable(t, c.table), c.iface)
			if c.want == "" {
				if err == nil {
					t.Fatalf("got gateway %s, want an error naming the missing default route", got)
				}
				return
			}
			if err != nil || got.String() != c.want {
				t.Fatalf("defaultGateway = %s, %v; want %s", got, err, c.want)
			}
		})
	}
}

func TestTheGatewaysMACIsACompleteNeighbourEntryOnTheInterface(t *testing.T) {
	table := writeTable(t, "IP address       HW type     Flags       HW address            Mask     Device\n"+
		"10.244.0.1       0x1         0x2         2a:4f:00:11:22:33     *        eth0\n"+
		"10.244.0.9       0x1         0x0         00:00:00:00:00:00     *        eth0\n"+
		"10.244.0.1       0x1         0x2         2a:4f:00:99:99:99     *        net1\n")
	cases := []struct {
		ip, want string
		found    bool
	}{
		{"10.244.0.1", "2a:4f:00:11:22:33", true},
		{"10.244.0.9", "", false}, // incomplete: not resolved yet
		{"10.244.0.7", "", false},
	}
	for _, c := range cases {
		mac, ok := neighbour(table, netip.MustParseAddr(c.ip), "eth0")
		if ok != c.found || (ok && mac.String() != c.want) {
			t.Errorf("neighbour(%s) = %s, %v; want %q, %v", c.ip, mac, ok, c.want, c.found)
		}
	}
}

func TestTheFrameIsAValidIPv4UDPDatagram(t *testing.T) {
	dstMAC, _ := net.ParseMAC("2a:4f:00:11:22:33")
	srcMAC, _ := net.ParseMAC("02:00:00:00:00:05")
	src, dst := netip.MustParseAddr("10.244.0.6"), netip.MustParseAddr("10.244.0.5")
	f := udpFrame(dstMAC, srcMAC, src, dst, 4242, []byte("nonce"))
	ip := f[14:]
	switch {
	case net.HardwareAddr(f[0:6]).String() != dstMAC.String() || net.HardwareAddr(f[6:12]).String() != srcMAC.String():
		t.Errorf("Ethernet addresses %x, want %s then %s", f[:12], dstMAC, srcMAC)
	case binary.BigEndian.Uint16(f[12:]) != 0x0800:
		t.Errorf("EtherType %#x, want IPv4", binary.BigEndian.Uint16(f[12:]))
	case checksum(ip[:20]) != 0:
		t.Errorf("IPv4 header checksum does not verify: %x", ip[:20])
	case netip.AddrFrom4([4]byte(ip[12:16])) != src || netip.AddrFrom4([4]byte(ip[16:20])) != dst:
		t.Errorf("IPv4 addresses %v -> %v, want %s -> %s", ip[12:16], ip[16:20], src, dst)
	case int(binary.BigEndian.Uint16(ip[2:])) != len(ip) || binary.BigEndian.Uint16(ip[22:]) != 4242 || string(ip[28:]) != "nonce":
		t.Errorf("datagram length/port/payload wrong: %x", ip)
	}
}

func TestOnlyOurDatagramIsRecognised(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:05")
	src, dst := netip.MustParseAddr("10.244.0.6"), netip.MustParseAddr("10.244.0.5")
	ours := udpFrame(mac, mac, src, dst, 4242, []byte("nonce"))
	cases := []struct {
		name  string
		frame []byte
		port  uint16
		ok    bool
	}{
		{"ours", ours, 4242, true},
		{"another port", ours, 4243, false},
		{"another payload", udpFrame(mac, mac, src, dst, 4242, []byte("other")), 4242, false},
		{"truncated", ours[:30], 4242, false},
		{"not IPv4", append(append([]byte{}, ours[:12]...), append([]byte{0x86, 0xdd}, ours[14:]...)...), 4242, false},
	}
	for _, c := range cases {
		got, ok := parseDatagram(c.frame, c.port, []byte("nonce"))
		if ok != c.ok || (ok && got != src) {
			t.Errorf("%s: parseDatagram = %s, %v; want %v (source %s)", c.name, got, ok, c.ok, src)
		}
	}
}
