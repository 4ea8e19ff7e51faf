package netcheck

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// udpFrame is an Ethernet frame carrying an IPv4 UDP datagram with every address chosen by the
// sender. The UDP checksum is left 0 (none), which IPv4 allows.
func udpFrame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, dport uint16, payload []byte) []byte {
	udp := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], 40000) // source port: nothing answers
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	udp = append(udp, payload...)

	ip := make([]byte, 20, 20+len(udp))
	ip[0] = 0x45 // IPv4, header of 5 words
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	ip[8], ip[9] = 64, 17 // TTL, UDP
	copy(ip[12:], src.AsSlice())
	copy(ip[16:], dst.AsSlice())
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	ip = append(ip, udp...)

	f := make([]byte, 0, 14+len(ip))
	f = append(append(f, dstMAC...), srcMAC...)
	f = binary.BigEndian.AppendUint16(f, 0x0800)
	return append(f, ip...)
}

// checksum is the Internet checksum (RFC 1071) of b.
func checksum(b []byte) uint16 {
	var sum uint32
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

// parseDatagram returns the source of an Ethernet/IPv4/UDP frame to port carrying payload.
func parseDatagram(f []byte, port uint16, payload []byte) (netip.Addr, bool) {
	if len(f) < 14+20+8 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return netip.Addr{}, false
	}
	ip := f[14:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ip[9] != 17 || ihl < 20 || len(ip) < ihl+8 {
		return netip.Addr{}, false
	}
	udp := ip[ihl:]
	if binary.BigEndian.Uint16(udp[2:]) != port || string(udp[8:]) != string(payload) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(ip[12:16])), true
}
