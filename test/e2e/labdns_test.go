//go:build e2e

package e2e

import (
	"errors"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/net/dns/dnsmessage"
)

// labDNS answers A queries for the names it holds, from a network namespace of a test host, as
// the authority of the zone test. that the local cluster's CoreDNS forwards to it
// (spec.TestDNSServer). Every answer lives one second, so a name moved to a new address is seen
// at the next lookup; an unknown name gets NXDOMAIN.
type labDNS struct {
	mu    sync.Mutex
	names map[string]netip.Addr // fully qualified, lower case
}

// serveLabDNS starts a labDNS on UDP port 53 of addr, inside network namespace ns, and stops it
// after the test.
func serveLabDNS(t *testing.T, ns string, addr netip.Addr, names map[string]string) *labDNS {
	t.Helper()
	d := &labDNS{names: map[string]netip.Addr{}}
	for n, a := range names {
		d.Set(n, a)
	}
	conn, err := listenUDPIn(ns, netip.AddrPortFrom(addr, 53))
	if err != nil {
		t.Fatalf("lab DNS on %s in %s: %v", addr, ns, err)
	}
	done := make(chan struct{})
	go func() { defer close(done); d.serve(conn) }()
	t.Cleanup(func() { _ = conn.Close(); <-done })
	return d
}

// Set makes name resolve to addr from now on.
func (d *labDNS) Set(name, addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.names[strings.ToLower(strings.TrimSuffix(name, "."))+"."] = netip.MustParseAddr(addr)
}

func (d *labDNS) lookup(name string) (netip.Addr, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.names[strings.ToLower(name)]
	return a, ok
}

func (d *labDNS) serve(conn *net.UDPConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if reply, ok := d.answer(buf[:n]); ok {
			_, _ = conn.WriteToUDPAddrPort(reply, from)
		}
	}
}

// answer builds the reply to one query; a message that is not one query gets none.
func (d *labDNS) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	hdr, err := p.Start(query)
	if err != nil || hdr.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	addr, known := d.lookup(q.Name.String())
	rh := dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true, RecursionDesired: hdr.RecursionDesired}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	if known && q.Type == dnsmessage.TypeA && addr.Is4() {
		rr := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 1}
		if b.AResource(rr, dnsmessage.AResource{A: addr.As4()}) != nil {
			return nil, false
		}
	}
	reply, err := b.Finish()
	return reply, err == nil
}

// listenUDPIn opens a UDP socket inside the named network namespace: the socket stays there
// whichever thread uses it afterwards.
func listenUDPIn(ns string, at netip.AddrPort) (*net.UDPConn, error) {
	type result struct {
		conn *net.UDPConn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		h, err := netns.GetFromName(ns)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			done <- result{err: err}
			return
		}
		conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(at))
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}
