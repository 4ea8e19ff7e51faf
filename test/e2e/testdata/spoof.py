# Raw Ethernet frames from a pod with NET_RAW (root under runc), for TestAPodWithNetRawCannotSendAsAnotherPod.
#
#   spoof.py listen PORT FILE
#       append "SYN <src> <sport>" / "RST <src> <seq>" to FILE for each TCP segment to PORT that
#       eth0 receives (before the pod's IP stack looks at it)
#   spoof.py send syn|arp DST_MAC ETH_SRC SRC_IP DST_IP SPORT SHA OWN_MAC OWN_IP FENCE_SEQ
#       send one forged frame, then a fence: a TCP RST to PORT 8080 from OWN_IP/OWN_MAC with
#       sequence number FENCE_SEQ, from the same CPU, so it arrives after the forged frame did
import os
import socket
import struct
import sys


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


def arp_frame(eth_src, sha, spa, tpa):
    body = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac(sha) + socket.inet_aton(spa) + b"\0" * 6 + socket.inet_aton(tpa)
    return b"\xff" * 6 + mac(eth_src) + b"\x08\x06" + body


def listen(port, path):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind(("eth0", 0))
    open(path, "a").close()
    while True:
        f, addr = s.recvfrom(65535)
        if addr[2] == socket.PACKET_OUTGOING or f[12:14] != b"\x08\x00" or f[23] != 6:
            continue
        ihl = (f[14] & 15) * 4
        sport, dport, seq = struct.unpack("!HHI", f[14 + ihl:22 + ihl])
        flags = f[14 + ihl + 13]
        if dport != port:
            continue
        src = socket.inet_ntoa(f[26:30])
        kind = "RST %s %d" % (src, seq) if flags & 4 else "SYN %s %d" % (src, sport) if flags & 2 else None
        if kind:
            with open(path, "a") as out:
                out.write(kind + "\n")


def send(kind, dst_mac, eth_src, src, dst, sport, sha, own_mac, own_ip, fence_seq):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind(("eth0", 0))
    if kind == "arp":
        s.send(arp_frame(eth_src, sha, src, dst))
    else:
        s.send(tcp_frame(dst_mac, eth_src, src, dst, int(sport), 8080, 0x02, 1))
    s.send(tcp_frame(dst_mac, own_mac, own_ip, dst, 40999, 8080, 0x04, int(fence_seq)))


if __name__ == "__main__":
    if sys.argv[1] == "listen":
        listen(int(sys.argv[2]), sys.argv[3])
    else:
        send(*sys.argv[2:])
