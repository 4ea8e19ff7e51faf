package hostnet

import (
	"context"
	"errors"
	"fmt"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
)

// RecordedSysctls are the host network settings the cluster changes: the forwarding and
// bridge-netfilter switches kube-proxy needs, and what cilium-agent sets when it starts
// (pkg/datapath/loader, pkg/datapath/iptables). kernel.unprivileged_bpf_disabled is not here:
// the agent moves it from 2 to 1, and 1 is sticky (the kernel refuses any other value until a
// reboot).
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
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
}

// Sysctls records RecordedSysctls (those this kernel has) and turns on what kube-proxy needs:
// bridged pod traffic passes iptables (its DNAT of pod → ClusterIP → pod on the same bridge,
// br_netfilter) and IPv4 forwarding (a DNATed packet is routed back onto the bridge; Cilium
// turns it on as well). Down writes back every recorded value that changed, whoever changed it.
type Sysctls struct{ Env }

type sysctlsRecord struct {
	Values map[string]string `json:"values"`
	// LoadedBrNetfilter: Up loaded the br_netfilter module (Down unloads it).
	LoadedBrNetfilter bool `json:"loadedBrNetfilter,omitempty"`
}

func (Sysctls) Name() string { return "sysctls" }

func (s Sysctls) Up(context.Context) error {
	rec, ok, err := load[sysctlsRecord](s.Env, s.Name())
	if err != nil {
		return err
	}
	if !ok {
		rec.Values = current(s.Host)
		if err := s.Store.Save(s.Name(), rec); err != nil {
			return err
		}
	}
	if _, ok := host.ReadSysctl(s.Host, "net/bridge/bridge-nf-call-iptables"); !ok {
		// Built into some kernels, a module in others; the module's settings appear with it.
		rec.LoadedBrNetfilter = true
		if err := s.Store.Save(s.Name(), rec); err != nil {
			return err
		}
		if _, err := s.Host.Run("modprobe", "br_netfilter"); err != nil {
			return fmt.Errorf("bridged traffic must pass iptables for kube-proxy: %w", err)
		}
		if err := s.recordMissing(&rec); err != nil {
			return err
		}
	}
	return errors.Join(
		host.WriteSysctl(s.Host, "net/bridge/bridge-nf-call-iptables", "1"),
		host.WriteSysctl(s.Host, "net/ipv4/ip_forward", "1"),
	)
}

// recordMissing adds the settings that appeared since the record was made (a module loaded).
func (s Sysctls) recordMissing(rec *sysctlsRecord) error {
	if rec.Values == nil {
		rec.Values = map[string]string{}
	}
	for n, v := range current(s.Host) {
		if _, ok := rec.Values[n]; !ok {
			rec.Values[n] = v
		}
	}
	return s.Store.Save(s.Name(), rec)
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
		// The bridge settings vanish with br_netfilter; a setting that is gone is skipped.
		if cur, exists := host.ReadSysctl(s.Host, n); exists && cur != want {
			errs = append(errs, host.WriteSysctl(s.Host, n, want))
		}
	}
	if rec.LoadedBrNetfilter {
		if _, ok := host.ReadSysctl(s.Host, "net/bridge/bridge-nf-call-iptables"); ok {
			if _, err := s.Host.Run("modprobe", "-r", "br_netfilter"); err != nil {
				errs = append(errs, err)
			}
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
