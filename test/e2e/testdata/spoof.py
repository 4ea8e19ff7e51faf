# Raw Ethernet frames from a pod with NET_RAW (root under runc), for TestAPodWithNetRawCannotSendAsAnotherPod.
#
#   spoof.py listen PORT FILE
#       append "SYN <src> <sport>" to FILE for each TCP SYN to PORT that eth0 receives (before
#       the pod's IP stack looks at it), and "FENCE <src> <n>" for each fence; a UDP socket on
#       FENCE_PORT takes the fences in silently
#   spoof.py send syn|arp DST_MAC ETH_SRC SRC_IP DST_IP SPORT SHA OWN_MAC OWN_IP FENCE_SEQ
#       send one forged frame, then a fence: a UDP datagram "fence <FENCE_SEQ>" to FENCE_PORT from
#       OWN_IP/OWN_MAC, from the same CPU, so it arrives after the forged frame did. UDP to a
#       bound socket: a new flow (a lone TCP RST would be conntrack-INVALID, which kube-proxy's
#       KUBE-FORWARD drops on the bridge) that gets no answer.
import os
import socket
import struct
import sys

FENCE_PORT = 9999


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s > 0xFFFF:
        s = (s >> 16) + (s & 0xFFFF)
    return ~s & 0xFFFF


def mac(s):
    return bytes.fromhex(s.replace(":", ""))


def tcp_frame(dst_mac, src_mac, src, dst, sport, dport, flags, seq):
    src_b, dst_b = socket.inet_aton(src), socket.inet_aton(dst)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, flags, 64240, 0, 0)
    csum = checksum(src_b + dst_b + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)
    tcp = tcp[:16] + struct.pack("!H", csum) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, src_b, dst_b)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return mac(dst_mac) + mac(src_mac) + b"\x08\x00" + ip + tcp


def udp_frame(dst_mac, src_mac, src, dst, sport, dport, payload):
    src_b, dst_b = socket.inet_aton(src), socket.inet_aton(dst)
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    csum = checksum(src_b + dst_b + struct.pack("!BBH", 0, 17, len(udp)) + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", csum) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, src_b, dst_b)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return mac(dst_mac) + mac(src_mac) + b"\x08\x00" + ip + udp


def arp_frame(eth_src, sha, spa, tpa):
    body = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac(sha) + socket.inet_aton(spa) + b"\0" * 6 + socket.inet_aton(tpa)
    return b"\xff" * 6 + mac(eth_src) + b"\x08\x06" + body


def listen(port, path):
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("0.0.0.0", FENCE_PORT))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind(("eth0", 0))
    open(path, "a").close()
    while True:
        f, addr = s.recvfrom(65535)
        if addr[2] == socket.PACKET_OUTGOING or f[12:14] != b"\x08\x00":
            continue
        ihl = (f[14] & 15) * 4
        src = socket.inet_ntoa(f[26:30])
        sport, dport = struct.unpack("!HH", f[14 + ihl:18 + ihl])
        line = None
        if f[23] == 6 and dport == port and f[14 + ihl + 13] & 2:
            line = "SYN %s %d" % (src, sport)
        elif f[23] == 17 and dport == FENCE_PORT:
            line = "FENCE %s %s" % (src, f[14 + ihl + 8:].decode(errors="replace").split()[-1])
        if line:
            with open(path, "a") as out:
                out.write(line + "\n")


def send(kind, dst_mac, eth_src, src, dst, sport, sha, own_mac, own_ip, fence_seq):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind(("eth0", 0))
    if kind == "arp":
        s.send(arp_frame(eth_src, sha, src, dst))
    else:
        s.send(tcp_frame(dst_mac, eth_src, src, dst, int(sport), 8080, 0x02, 1))
    s.send(udp_frame(dst_mac, own_mac, own_ip, dst, 40999, FENCE_PORT, b"fence %d" % int(fence_seq)))


if __name__ == "__main__":
    if sys.argv[1] == "listen":
        listen(int(sys.argv[2]), sys.argv[3])
    else:
        send(*sys.argv[2:])
