package hostnet

import (
	"context"
	"errors"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
)

// RecordedSysctls are the host network settings the cluster changes: forwarding, the
// bridge-netfilter switches, conntrack's liberal TCP mode (kube-proxy), and what cilium-agent
// sets when it starts (pkg/datapath/loader, pkg/datapath/iptables).
// kernel.unprivileged_bpf_disabled is not here: the agent moves it
// from 2 to 1, and 1 is sticky (the kernel refuses any other value until a reboot).
var RecordedSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/forwarding",
	"net/ipv4/conf/all/rp_filter",
	"net/ipv4/conf/all/accept_redirects",
	"net/ipv4/conf/all/send_redirects",
	"net/ipv4/conf/all/route_localnet",
	"net/ipv4/fib_multipath_use_neigh",
	"net/ipv4/ip_early_demux",
	"net/ipv6/conf/all/forwarding",
	"net/ipv6/conf/all/disable_ipv6",
	"net/core/bpf_jit_enable",
	"net/core/fb_tunnels_only_for_init_net",
	"kernel/timer_migration",
	conntrackTCPBeLiberal,
	bridgeCallIptables,
	bridgeCallIp6tables,
}

// conntrackTCPBeLiberal is set by kube-proxy's tcpBeLiberal. It appears only once conntrack is
// loaded, maybe after Up recorded the host; its kernel default, 0, is then what Down restores.
const conntrackTCPBeLiberal = "net/netfilter/nf_conntrack_tcp_be_liberal"

// The br_netfilter switches: whether frames the bridge forwards pass iptables.
const (
	bridgeCallIptables  = "net/bridge/bridge-nf-call-iptables"
	bridgeCallIp6tables = "net/bridge/bridge-nf-call-ip6tables"
)

// Sysctls records RecordedSysctls (those this kernel has), turns on IPv4 forwarding (pod
// traffic to the host's other networks is routed) and keeps bridged frames out of iptables.
// Cilium translates a pod's Service traffic in the BPF program at the pod's veth, so kube-proxy's
// rules never need to see a frame the bridge forwards; and with br_netfilter on, a lookup that
// Cilium hands to its DNS proxy (domain allow-lists) is TPROXYed while still a bridged frame and
// never reaches the proxy's socket (tried: every lookup of a pod under a toFQDNs policy timed out
// until bridge-nf-call-iptables was 0). Down writes back every recorded value that changed,
// whoever changed it.
type Sysctls struct{ Env }

type sysctlsRecord struct {
	Values map[string]string `json:"values"`
}

func (Sysctls) Name() string { return "sysctls" }

func (s Sysctls) Up(context.Context) error {
	rec, ok, err := load[sysctlsRecord](s.Env, s.Name())
	if err != nil {
		return err
	}
	if !ok {
		rec.Values = current(s.Host)
		if _, loaded := rec.Values[conntrackTCPBeLiberal]; !loaded {
			rec.Values[conntrackTCPBeLiberal] = "0"
		}
		if err := s.Store.Save(s.Name(), rec); err != nil {
			return err
		}
	}
	errs := []error{host.WriteSysctl(s.Host, "net/ipv4/ip_forward", "1")}
	for _, n := range []string{bridgeCallIptables, bridgeCallIp6tables} {
		// Absent where br_netfilter is not loaded: then nothing bridged passes iptables anyway.
		if _, exists := host.ReadSysctl(s.Host, n); exists {
			errs = append(errs, host.WriteSysctl(s.Host, n, "0"))
		}
	}
	return errors.Join(errs...)
}

func (s Sysctls) Down(context.Context) error {
	rec, ok, err := load[sysctlsRecord](s.Env, s.Name())
	if !ok || err != nil {
		return err
	}
	var errs []error
	for _, n := range RecordedSysctls {
		want, ok := rec.Values[n]
		if !ok {
			continue
		}
		// A setting that is gone (its module unloaded meanwhile) is skipped.
		if cur, exists := host.ReadSysctl(s.Host, n); exists && cur != want {
			errs = append(errs, host.WriteSysctl(s.Host, n, want))
		}
	}
	return finish(s.Env, s.Name(), errors.Join(errs...))
}

// current reads the recorded settings that exist on this kernel.
func current(h host.Host) map[string]string {
	out := map[string]string{}
	for _, n := range RecordedSysctls {
		if v, ok := host.ReadSysctl(h, n); ok {
			out[n] = v
		}
	}
	return out
}
