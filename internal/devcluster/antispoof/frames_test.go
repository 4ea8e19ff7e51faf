package antispoof

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Frames an attacker writes on an AF_PACKET socket: whole Ethernet frames, every address chosen
// by the sender.

const (
	etherIPv4 = 0x0800
	etherARP  = 0x0806
	tcpSYN    = 0x02
	tcpRST    = 0x04
)

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func ethernet(dst, src net.HardwareAddr, etherType uint16, payload []byte) []byte {
	f := make([]byte, 0, 14+len(payload))
	f = append(append(f, dst...), src...)
	f = binary.BigEndian.AppendUint16(f, etherType)
	return append(f, payload...)
}

// arpFrame is an Ethernet/IPv4 ARP request: "who has tpa? tell spa (at sha)". With tpa == spa
// it is a gratuitous ARP.
func arpFrame(ethSrc, sha net.HardwareAddr, spa, tpa netip.Addr) []byte {
	b := []byte{0, 1, 0x08, 0x00, 6, 4, 0, 1} // Ethernet, IPv4, hlen 6, plen 4, request
	b = append(b, sha...)
	b = append(b, spa.AsSlice()...)
	b = append(b, make([]byte, 6)...)
	b = append(b, tpa.AsSlice()...)
	return ethernet(broadcast, ethSrc, etherARP, b)
}

// checksum is the Internet checksum (RFC 1071) of b, starting from sum.
func checksum(sum uint32, b []byte) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// tcpFrame is an IPv4 TCP segment without payload: flags SYN or RST, seq as a marker.
func tcpFrame(dst, src net.HardwareAddr, srcIP, dstIP netip.Addr, sport, dport uint16, flags byte, seq uint32) []byte {
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4 // header length: 5 words
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:], 64240) // window
	pseudo := append(append(srcIP.AsSlice(), dstIP.AsSlice()...), 0, 6, 0, 20)
	binary.BigEndian.PutUint16(tcp[16:], checksum(uint32(^checksum(0, pseudo)), tcp))

	ip := make([]byte, 20)
	ip[0] = 0x45 // IPv4, 5 words
	binary.BigEndian.PutUint16(ip[2:], 40)
	ip[8], ip[9] = 64, 6 // TTL, TCP
	copy(ip[12:], srcIP.AsSlice())
	copy(ip[16:], dstIP.AsSlice())
	binary.BigEndian.PutUint16(ip[10:], checksum(0, ip))
	return ethernet(dst, src, etherIPv4, append(ip, tcp...))
}

// tcpSeen is what the router's sniffer reads from a received IPv4 TCP frame.
type tcpSeen struct {
	src          netip.Addr
	sport, dport uint16
	flags        byte
	seq          uint32
}

func parseTCP(f []byte) (tcpSeen, bool) {
	if len(f) < 14+40 || binary.BigEndian.Uint16(f[12:]) != etherIPv4 {
		return tcpSeen{}, false
	}
	ip := f[14:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[9] != 6 || len(ip) < ihl+20 {
		return tcpSeen{}, false
	}
	tcp := ip[ihl:]
	src, _ := netip.AddrFromSlice(ip[12:16])
	return tcpSeen{
		src: src, sport: binary.BigEndian.Uint16(tcp[0:]), dport: binary.BigEndian.Uint16(tcp[2:]),
		flags: tcp[13], seq: binary.BigEndian.Uint32(tcp[4:]),
	}, true
}
