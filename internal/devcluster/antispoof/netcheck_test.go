package antispoof

import (
	"context"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/router/netcheck"
)

// TestTheRoutersNetworkCheckTellsWhetherForgedSourcesPass runs the router's start-up check
// (internal/router/netcheck) in a lab pod whose gateway is another namespace on the bridge, as
// the bridge CNI's gateway is the host: without the anti-spoofing plugin the forged datagram
// comes back (the router would refuse to start), with it only the control does.
func TestTheRoutersNetworkCheckTellsWhetherForgedSourcesPass(t *testing.T) {
	needRoot(t)
	l := newLab(t)
	addGateway(t, l)
	probe := l.attacker
	sh(t, "ip", "-n", probe.ns, "route", "add", "default", "via", labGateway)
	plugin := buildPlugin(t)
	tableBefore := tableExists(t)
	t.Cleanup(func() {
		_ = runPlugin(plugin, "DEL", probe, nil)
		if !tableBefore {
			_ = exec.Command("nft", "delete", "table", Family, Table).Run()
		}
	})

	check := func(t *testing.T, want netcheck.Verdict) {
		t.Helper()
		res, err := probeIn(probe)
		if err != nil {
			t.Fatalf("the check found no verdict, want %q: %v", want, err)
		}
		if res.Verdict != want || res.Own != probe.ip || res.Gateway.String() != labGateway {
			t.Fatalf("verdict %q (own %s, gateway %s): %s; want %q from %s through %s", res.Verdict, res.Own, res.Gateway, res, want, probe.ip, labGateway)
		}
	}
	t.Run("without the plugin a forged source passes", func(t *testing.T) { check(t, netcheck.Passes) })
	if err := runPlugin(plugin, "ADD", probe, l.prevResult(probe)); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	t.Run("with the plugin forged sources are blocked", func(t *testing.T) { check(t, netcheck.Blocked) })
	if err := runPlugin(plugin, "DEL", probe, l.prevResult(probe)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	t.Run("after DEL a forged source passes again", func(t *testing.T) { check(t, netcheck.Passes) })
}

// TestTheNetworkCheckGivesNoVerdictWhenNothingComesBack: a pod whose gateway does not route
// (forwarding off) sees neither datagram; silence must not read as "blocked".
func TestTheNetworkCheckGivesNoVerdictWhenNothingComesBack(t *testing.T) {
	needRoot(t)
	l := newLab(t)
	gw := addGateway(t, l)
	sh(t, "ip", "netns", "exec", gw, "sysctl", "-qw", "net.ipv4.ip_forward=0")
	sh(t, "ip", "-n", l.attacker.ns, "route", "add", "default", "via", labGateway)
	if res, err := probeIn(l.attacker); err == nil {
		t.Fatalf("verdict %q (%s); want an error saying even the control did not come back", res.Verdict, res)
	}
}

const labGateway = "10.250.77.254"

// addGateway adds a namespace on the bridge at .254 that forwards: the pods' default gateway.
func addGateway(t *testing.T, l *lab) string {
	t.Helper()
	gw := l.router.ns + "-gw"
	sh(t, "ip", "netns", "add", gw)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", gw).Run() })
	veth := l.router.veth + "g"
	sh(t, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", gw)
	sh(t, "ip", "link", "set", veth, "master", l.bridge, "up")
	sh(t, "ip", "-n", gw, "addr", "add", labGateway+"/24", "dev", "eth0")
	sh(t, "ip", "-n", gw, "link", "set", "eth0", "up")
	sh(t, "ip", "netns", "exec", gw, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	return gw
}

// probeIn runs the check on a thread of its own inside the pod's namespace.
func probeIn(p labPod) (netcheck.Result, error) {
	type out struct {
		res netcheck.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := enterNetns(p.nsPath()); err != nil {
			done <- out{err: err}
			return
		}
		res, err := netcheck.Probe(context.Background(), netcheck.Options{Timeout: 5 * time.Second})
		done <- out{res, err}
	}()
	o := <-done
	return o.res, o.err
}
