package antispoof

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A small stand-in for the local cluster's pod network, needing no Kubernetes: a Linux bridge
// and one network namespace per "pod", each attached by a veth pair as the bridge CNI plugin
// attaches pods.

type labPod struct {
	ns   string // network namespace name (under /run/netns)
	veth string // host side, a port of the bridge
	mac  net.HardwareAddr
	ip   netip.Addr
}

func (p labPod) nsPath() string { return filepath.Join("/run/netns", p.ns) }

type lab struct {
	bridge                   string
	router, victim, attacker labPod
}

// needRoot skips unless the test can change the host's network: root, ip, nft, and a kernel
// with bridges and nf_tables' bridge family.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a bridge, network namespaces and nftables rules")
	}
	for _, bin := range []string{"ip", "nft", "go"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s on PATH (nft: Debian's nftables, hack/install-node-deps.sh)", bin)
		}
	}
	if out, err := exec.Command("nft", "-c", "add", "table", Family, Table+"-probe").CombinedOutput(); err != nil {
		t.Skipf("the kernel lacks nf_tables' bridge family: %v %s", err, out)
	}
}

func sh(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newLab builds the bridge and the router (.1), victim (.2) and attacker (.3); t.Cleanup
// removes all of it (deleting a namespace deletes its veth pair).
func newLab(t testing.TB) *lab {
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	id := hex.EncodeToString(suffix)
	l := &lab{bridge: "sbxt" + id + "br"}
	if out, err := exec.Command("ip", "link", "add", l.bridge, "type", "bridge").CombinedOutput(); err != nil {
		t.Skipf("cannot create a bridge: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", l.bridge).Run() })
	sh(t, "ip", "link", "set", l.bridge, "up")
	for i, p := range []*labPod{&l.router, &l.victim, &l.attacker} {
		name := []string{"router", "victim", "attacker"}[i]
		*p = labPod{ns: "sbxt-" + id + "-" + name, veth: "sbxt" + id + name[:1], ip: netip.AddrFrom4([4]byte{10, 250, 77, byte(i + 1)})}
		sh(t, "ip", "netns", "add", p.ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.ns).Run() })
		sh(t, "ip", "link", "add", p.veth, "type", "veth", "peer", "name", "eth0", "netns", p.ns)
		sh(t, "ip", "link", "set", p.veth, "master", l.bridge, "up")
		sh(t, "ip", "-n", p.ns, "addr", "add", p.ip.String()+"/24", "dev", "eth0")
		sh(t, "ip", "-n", p.ns, "link", "set", "eth0", "up")
		p.mac = linkMAC(t, p.ns)
	}
	return l
}

func linkMAC(t testing.TB, ns string) net.HardwareAddr {
	t.Helper()
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal([]byte(sh(t, "ip", "-n", ns, "-j", "link", "show", "eth0")), &links); err != nil || len(links) != 1 {
		t.Fatalf("reading eth0 of %s: %v", ns, err)
	}
	mac, err := net.ParseMAC(links[0].Address)
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// neighbour is the router's ARP entry for ip ("" when it has none).
func neighbour(t *testing.T, ns string, ip netip.Addr) string {
	t.Helper()
	var entries []struct {
		LLAddr string `json:"lladdr"`
	}
	out := sh(t, "ip", "-n", ns, "-j", "neigh", "show", "to", ip.String(), "dev", "eth0")
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("ip neigh: %v: %s", err, out)
	}
	if len(entries) == 0 {
		return ""
	}
	return entries[0].LLAddr
}

// packetSocket opens an AF_PACKET socket on eth0 inside the namespace; it keeps working there
// whatever namespace the caller's thread is in.
func packetSocket(t *testing.T, p labPod) int {
	t.Helper()
	fd, err := inNetns(p.nsPath(), func() (int, error) {
		iface, err := net.InterfaceByName("eth0")
		if err != nil {
			return -1, err
		}
		proto := int(htons(unix.ETH_P_ALL))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return -1, err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: iface.Index}); err != nil {
			_ = unix.Close(fd)
			return -1, err
		}
		return fd, nil
	})
	if err != nil {
		t.Skipf("no AF_PACKET socket in %s: %v", p.ns, err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	return fd
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// inNetns runs fn on a thread of its own moved into the namespace at path; the thread is never
// returned to other goroutines (it exits with its goroutine, still locked).
func inNetns(path string, fn func() (int, error)) (int, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread()
		if err := enterNetns(path); err != nil {
			done <- result{-1, fmt.Errorf("setns %s: %w", path, err)}
			return
		}
		fd, err := fn()
		done <- result{fd, err}
	}()
	r := <-done
	return r.fd, r.err
}
