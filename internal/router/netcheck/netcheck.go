// Package netcheck tells whether the pod network lets a pod send IPv4 packets whose source is
// an address that is not its own. The router's tokenless identity (--identify-pods) names a
// caller by its connection's source address, so it holds only where forged sources are dropped
// before they reach another pod; the router pod runs this check (an init container with
// NET_RAW) and refuses to start when a forged source gets through.
//
// The check needs no peer: from the pod's own interface it sends two UDP datagrams to its own
// address through the default gateway, one from its own address (the control) and one from
// another address of its subnet (the forgery), and listens for them. A network that filters
// forged sources (the local cluster's anti-spoofing bridge plugin, a CNI's source-address
// check) drops the forgery at the pod's port; the control proves the path works, so silence is
// never mistaken for safety.
package netcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// Verdict is what the check saw.
type Verdict string

const (
	// Blocked: the control came back and the forgery did not.
	Blocked Verdict = "blocked"
	// Passes: a datagram with a forged source reached the pod.
	Passes Verdict = "passes"
)

// Result is a finished check; Err is set when it could not decide (no verdict then).
type Result struct {
	Verdict   Verdict
	Interface string
	Own       netip.Addr
	Forged    netip.Addr
	Gateway   netip.Addr
}

func (r Result) String() string {
	switch r.Verdict {
	case Blocked:
		return fmt.Sprintf("forged source addresses are dropped: a datagram from %s sent on %s through %s never came back, one from the pod's own %s did",
			r.Forged, r.Interface, r.Gateway, r.Own)
	case Passes:
		return fmt.Sprintf("forged source addresses pass: a datagram the pod sent on %s as %s (not its address, %s) came back through %s, so any pod with NET_RAW can pose as another pod",
			r.Interface, r.Forged, r.Own, r.Gateway)
	}
	return "no verdict"
}

// Options tune a check; the zero value is the default.
type Options struct {
	// Interface is the pod's interface (default eth0).
	Interface string
	// Timeout bounds the whole check (default 10s).
	Timeout time.Duration
}

// Probe runs the check once.
func Probe(ctx context.Context, o Options) (Result, error) {
	if o.Interface == "" {
		o.Interface = "eth0"
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	link, err := discover(ctx, o.Interface)
	if err != nil {
		return Result{}, err
	}
	res := Result{Interface: o.Interface, Own: link.own.Addr(), Forged: forgedSource(link.own, link.gateway), Gateway: link.gateway}
	got, err := sendAndListen(ctx, link, res.Forged)
	if err != nil {
		return res, err
	}
	if got.forged {
		res.Verdict = Passes
		return res, nil
	}
	if !got.control {
		return res, fmt.Errorf("no verdict: even a datagram from the pod's own address %s, sent on %s through %s, did not come back within %s (does the network route a pod's packets to itself through its gateway?)",
			res.Own, o.Interface, res.Gateway, o.Timeout)
	}
	res.Verdict = Blocked
	return res, nil
}

// forgedSource is an address of own's subnet that is neither own nor the gateway: what a pod
// posing as its neighbour would write. A /31 or /32 pod address (routed pod networks) borrows
// the neighbouring address all the same.
func forgedSource(own netip.Prefix, gateway netip.Addr) netip.Addr {
	first := own.Masked().Addr().Next()
	a := own.Addr()
	for range 4 {
		a = a.Next()
		if !own.Contains(a) || (own.Bits() < 31 && !own.Contains(a.Next())) { // past the end, or broadcast
			a = first
		}
		if a != own.Addr() && a != gateway {
			return a
		}
	}
	return own.Addr().Next()
}

type received struct{ control, forged bool }

// sendAndListen sends the forgery, then the control, until the control comes back or ctx
// ends; then it waits a little longer for a late forgery. What comes back is read off the
// interface, before IP: the kernel drops the control itself (a packet from outside with one of
// its own addresses as source is a martian), and a UDP socket holds the port so that a forgery
// that does get through is consumed quietly.
func sendAndListen(ctx context.Context, link linkInfo, forged netip.Addr) (received, error) {
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(link.own.Addr(), 0)))
	if err != nil {
		return received{}, fmt.Errorf("listening on %s: %w", link.own.Addr(), err)
	}
	defer conn.Close()
	port := uint16(conn.LocalAddr().(*net.UDPAddr).Port)
	sock, err := packetSocket(link.index)
	if err != nil {
		return received{}, err
	}
	defer unix.Close(sock)
	nonce := newNonce()
	arrivals := make(chan netip.Addr, 16)
	stop := make(chan struct{})
	defer close(stop)
	go sniff(sock, port, nonce, arrivals, stop)

	var got received
	resend := time.NewTicker(500 * time.Millisecond)
	defer resend.Stop()
	var grace <-chan time.Time
	for {
		if grace == nil {
			if err := sendPair(sock, link, forged, port, nonce); err != nil {
				return got, err
			}
		}
		select {
		case src := <-arrivals:
			switch src {
			case forged:
				got.forged = true
				return got, nil
			case link.own.Addr():
				if !got.control {
					got.control = true
					grace = time.After(300 * time.Millisecond)
				}
			}
		case <-resend.C:
		case <-grace:
			return got, nil
		case <-ctx.Done():
			return got, nil
		}
	}
}

func sendPair(sock int, link linkInfo, forged netip.Addr, port uint16, nonce []byte) error {
	for _, src := range []netip.Addr{forged, link.own.Addr()} {
		frame := udpFrame(link.gatewayMAC, link.mac, src, link.own.Addr(), port, nonce)
		if err := unix.Send(sock, frame, 0); err != nil {
			return fmt.Errorf("sending a raw frame on %s (needs NET_RAW): %w", link.name, err)
		}
	}
	return nil
}

// sniff reports the source of every incoming frame that carries our datagram, until stop.
func sniff(sock int, port uint16, nonce []byte, arrivals chan<- netip.Addr, stop <-chan struct{}) {
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(sock, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 65536)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, from, err := unix.Recvfrom(sock, buf, 0)
		if err != nil {
			continue // timeout: look at stop again
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if src, ok := parseDatagram(buf[:n], port, nonce); ok {
			select {
			case arrivals <- src:
			default:
			}
		}
	}
}

func newNonce() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return []byte("agent-sandbox-netcheck " + hex.EncodeToString(b))
}

// packetSocket is an AF_PACKET socket on the interface for IPv4 frames, sent and received whole.
func packetSocket(index int) (int, error) {
	proto := htons(unix.ETH_P_IP)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return -1, fmt.Errorf("opening a packet socket (the check needs NET_RAW): %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: index}); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("binding the packet socket: %w", err)
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

var errNoGateway = errors.New("no default IPv4 route")
