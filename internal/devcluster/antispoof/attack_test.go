package antispoof

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	current "github.com/containernetworking/cni/pkg/types/100"
	"golang.org/x/sys/unix"
)

// nobodys is a MAC no interface owns: frames sent to it are flooded by the bridge, so an
// attacker that makes the router believe it is the victim's reads the replies (issue 37).
var nobodys = net.HardwareAddr{0x02, 0x5b, 0xad, 0x00, 0x00, 0x01}

// spoof is one packet the attacker sends: an ARP telling the router "spa is at sha", or a TCP
// SYN to the router's port 8080 from srcIP.
type spoof struct {
	name   string
	arp    bool
	garp   bool // gratuitous: target address = sender address
	ethSrc net.HardwareAddr
	sha    net.HardwareAddr // ARP sender MAC
	srcIP  netip.Addr       // ARP sender IP, or IP source
	forged bool             // not the attacker's own addresses: the plugin must drop it
}

func spoofs(l *lab) []spoof {
	own, victim := l.attacker.mac, l.victim.ip
	return []spoof{
		{name: "gratuitous ARP: the victim's IP is at a MAC nobody owns", arp: true, garp: true, ethSrc: nobodys, sha: nobodys, srcIP: victim, forged: true},
		{name: "ARP to the router: the victim's IP is at a MAC nobody owns", arp: true, ethSrc: nobodys, sha: nobodys, srcIP: victim, forged: true},
		{name: "ARP to the router: the victim's IP is at the attacker's MAC", arp: true, ethSrc: own, sha: own, srcIP: victim, forged: true},
		{name: "ARP to the router: the attacker's IP is at a MAC nobody owns, sent from its own MAC", arp: true, ethSrc: own, sha: nobodys, srcIP: l.attacker.ip, forged: true},
		{name: "control: ARP to the router with the attacker's own IP and MAC", arp: true, ethSrc: own, sha: own, srcIP: l.attacker.ip},
		{name: "SYN to the router from the victim's IP and a MAC nobody owns", ethSrc: nobodys, srcIP: victim, forged: true},
		{name: "SYN to the router from the victim's IP and the attacker's MAC", ethSrc: own, srcIP: victim, forged: true},
		{name: "SYN to the router from the attacker's IP and a MAC nobody owns", ethSrc: nobodys, srcIP: l.attacker.ip, forged: true},
		{name: "control: SYN to the router from the attacker's own IP and MAC", ethSrc: own, srcIP: l.attacker.ip},
	}
}

// TestAPodCannotSendAsAnotherPodsAddress is issue 37's attack 1: a pod with NET_RAW answers ARP
// for the victim pod's IP and speaks TCP to the router as the victim. Without the plugin every
// forged packet reaches the router (the test can fail); with it, only the attacker's own
// addresses do; after DEL, forged packets pass again.
func TestAPodCannotSendAsAnotherPodsAddress(t *testing.T) {
	needRoot(t)
	l := newLab(t)
	plugin := buildPlugin(t)
	tableBefore := tableExists(t)
	t.Cleanup(func() {
		// Ours alone, unless the table held a running cluster's pods already.
		for _, p := range []labPod{l.victim, l.attacker} {
			_ = runPlugin(plugin, "DEL", p, nil)
		}
		if !tableBefore {
			_ = exec.Command("nft", "delete", "table", Family, Table).Run()
		}
	})
	send, sniff := packetSocket(t, l.attacker), packetSocket(t, l.router)
	sent := &sender{l: l, send: send, sniff: sniff}

	t.Run("without the plugin every forged packet reaches the router", func(t *testing.T) {
		sent.expect(t, func(spoof) bool { return true })
	})
	for _, p := range []labPod{l.victim, l.attacker, l.attacker} { // ADD twice: idempotent
		if err := runPlugin(plugin, "ADD", p, l.prevResult(p)); err != nil {
			t.Fatalf("ADD for %s: %v", p.ns, err)
		}
	}
	for _, p := range []labPod{l.victim, l.attacker} {
		if err := runPlugin(plugin, "CHECK", p, l.prevResult(p)); err != nil {
			t.Errorf("CHECK after ADD for %s: %v", p.ns, err)
		}
	}
	t.Run("with the plugin only the attacker's own addresses reach the router", func(t *testing.T) {
		sent.expect(t, func(s spoof) bool { return !s.forged })
	})
	// DEL is repeated, and may come without prevResult.
	for _, prev := range []*current.Result{l.prevResult(l.attacker), nil, nil} {
		if err := runPlugin(plugin, "DEL", l.attacker, prev); err != nil {
			t.Fatalf("DEL: %v", err)
		}
	}
	if err := runPlugin(plugin, "CHECK", l.attacker, l.prevResult(l.attacker)); err == nil {
		t.Error("CHECK after DEL succeeded, want it to report the missing rules")
	}
	t.Run("after DEL forged packets reach the router again", func(t *testing.T) {
		sent.expect(t, func(spoof) bool { return true })
	})
}

// sender sends the spoofs from the attacker and watches what reaches the router.
type sender struct {
	l           *lab
	send, sniff int
	seq         uint32
}

// expect sends each spoof, then a fence (a TCP RST, which the router answers with nothing,
// from the attacker's own addresses), and checks, once the fence has reached the router,
// whether the spoof did. Both leave one pinned thread, so they travel the same CPU's queues in
// order: the fence's arrival, not a timeout, says the spoof had its chance.
func (s *sender) expect(t *testing.T, through func(spoof) bool) {
	for i, sp := range spoofs(s.l) {
		t.Run(sp.name, func(t *testing.T) {
			want := through(sp)
			sport := uint16(41000 + i)
			var frame []byte
			if sp.arp {
				// The router's entry for the address, as if learned before the attack.
				sh(t, "ip", "-n", s.l.router.ns, "neigh", "replace", sp.srcIP.String(), "lladdr", "02:5b:ad:00:00:aa", "dev", "eth0", "nud", "stale")
				tpa := s.l.router.ip
				if sp.garp {
					tpa = sp.srcIP
				}
				frame = arpFrame(sp.ethSrc, sp.sha, sp.srcIP, tpa)
			} else {
				frame = tcpFrame(s.l.router.mac, sp.ethSrc, sp.srcIP, s.l.router.ip, sport, 8080, tcpSYN, 1)
			}
			s.seq++
			fence := tcpFrame(s.l.router.mac, s.l.attacker.mac, s.l.attacker.ip, s.l.router.ip, 40999, 8080, tcpRST, s.seq)
			s.pinned(t, frame, fence)
			synSeen := s.untilFence(t, sp.srcIP, sport)
			if sp.arp {
				got := neighbour(t, s.l.router.ns, sp.srcIP)
				if learned := got == sp.sha.String(); learned != want {
					t.Errorf("router's ARP entry for %s is %q; took the attacker's %s: %v, want %v", sp.srcIP, got, sp.sha, learned, want)
				}
			} else if synSeen != want {
				t.Errorf("SYN from %s (ether %s) reached the router: %v, want %v", sp.srcIP, sp.ethSrc, synSeen, want)
			}
		})
	}
}

// pinned sends the frames in order from one thread held on one CPU.
func (s *sender) pinned(t *testing.T, frames ...[]byte) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	for c := 0; c < 1024; c++ {
		if old.IsSet(c) {
			one.Set(c)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.SchedSetaffinity(0, &old) }()
	for _, f := range frames {
		if err := unix.Send(s.send, f, 0); err != nil {
			t.Fatalf("sending from the attacker: %v", err)
		}
	}
}

// untilFence reads the router's frames up to the fence numbered s.seq and reports whether a
// SYN from src:sport came first. The read timeout only bounds a broken setup.
func (s *sender) untilFence(t *testing.T, src netip.Addr, sport uint16) (synSeen bool) {
	tv := unix.NsecToTimeval((10 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(s.sniff, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65536)
	for {
		n, from, err := unix.Recvfrom(s.sniff, buf, 0)
		if err != nil {
			t.Fatalf("the fence from the attacker's own address never reached the router: %v", err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		seg, ok := parseTCP(buf[:n])
		switch {
		case !ok:
		case seg.flags&tcpRST != 0 && seg.sport == 40999 && seg.seq == s.seq:
			return synSeen
		case seg.flags&tcpSYN != 0 && seg.src == src && seg.sport == sport:
			synSeen = true
		}
	}
}

// prevResult is what the bridge plugin reports for a pod: the bridge, the host veth, and the
// container's eth0 with its address (the victim gets an IPv6 one too, so that rules for both
// families load).
func (l *lab) prevResult(p labPod) *current.Result {
	two := 2
	res := &current.Result{
		CNIVersion: "1.0.0",
		Interfaces: []*current.Interface{
			{Name: l.bridge}, {Name: p.veth}, {Name: "eth0", Mac: p.mac.String(), Sandbox: p.nsPath()},
		},
		IPs: []*current.IPConfig{{Interface: &two, Address: net.IPNet{IP: p.ip.AsSlice(), Mask: net.CIDRMask(24, 32)}}},
	}
	if p.ns == l.victim.ns {
		res.IPs = append(res.IPs, &current.IPConfig{Interface: &two, Address: net.IPNet{IP: net.ParseIP("fd00:77::2"), Mask: net.CIDRMask(64, 128)}})
	}
	return res
}

func buildPlugin(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	sh(t, "go", "build", "-o", filepath.Join(dir, PluginType), "github.com/agent-sandbox/agent-sandbox/cmd/cni-antispoof")
	return filepath.Join(dir, PluginType)
}

func tableExists(t testing.TB) bool {
	return strings.Contains(sh(t, "nft", "list", "tables", Family), "table "+Family+" "+Table+"\n")
}

// runPlugin executes the plugin as a container runtime does (libcni's invoke): CNI_* in the
// environment, the network config with prevResult on stdin, in the conflist's version 0.4.0.
func runPlugin(plugin, cmd string, p labPod, prev *current.Result) error {
	conf := map[string]any{"cniVersion": "0.4.0", "name": "sbxtest", "type": PluginType}
	if prev != nil {
		old, err := prev.GetAsVersion("0.4.0")
		if err != nil {
			return err
		}
		conf["prevResult"] = old
	}
	data, err := json.Marshal(conf)
	if err != nil {
		return err
	}
	args := &invoke.Args{Command: cmd, ContainerID: "ctr-" + p.ns, NetNS: p.nsPath(), IfName: "eth0", Path: filepath.Dir(plugin)}
	if cmd == "ADD" {
		res, err := invoke.ExecPluginWithResult(context.Background(), plugin, data, args, nil)
		if err == nil && res == nil {
			err = net.UnknownNetworkError("ADD returned no result")
		}
		return err
	}
	return invoke.ExecPluginWithoutResult(context.Background(), plugin, data, args, nil)
}
