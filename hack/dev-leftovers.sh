#!/usr/bin/env bash
# Lists anything of the local dev cluster still on this machine after `devcluster down`: processes
# (kube-proxy, cilium-agent, CoreDNS and gVisor's included), runsc's state, the pod bridge, veths and Cilium's links, pod
# network namespaces, KUBE-*/CNI-*/CILIUM_*/SBXDEV-* iptables chains, the anti-spoofing CNI
# plugin's nft table, Cilium's BPF pins and
# runtime dir, mounts under the state dir, host dirs and cgroups the cluster creates; prints the
# sysctls the cluster changes and whether bpffs is mounted. Exits 1 if any leftover is found, 0
# (printing "clean") otherwise.
#
#   hack/dev-leftovers.sh [STATE_DIR]   default: ${XDG_STATE_HOME:-~/.local/state}/agent-sandbox/dev
set -uo pipefail

dir="${1:-${XDG_STATE_HOME:-$HOME/.local/state}/agent-sandbox/dev}"
found=0
report() { echo "leftover: $*"; found=1; }

# Processes whose binary or arguments point into the state dir or at its containerd socket.
for p in /proc/[0-9]*; do
  cmd="$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" || continue
  [[ "$cmd" == *"$dir/"* ]] && report "process ${p#/proc/}: $cmd"
done
# Programs of the cluster that may run from the build cache rather than the state dir; gVisor's
# processes (shim, runsc, runsc-sandbox, runsc-gofer and systrap's stubs, whose command line is
# empty) are recognised by their executable in the gVisor build cache.
gvisor_cache="${AGENT_SANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox}/gvisor/"
for p in /proc/[0-9]*; do
  comm="$(cat "$p/comm" 2>/dev/null)" || continue
  case "$comm" in cilium-agent|kube-proxy|coredns) report "process ${p#/proc/}: $comm" ;; esac
  exe="$(readlink "$p/exe" 2>/dev/null)" || continue
  [[ "$exe" == "$gvisor_cache"* ]] && report "gVisor process ${p#/proc/} ($comm): $exe $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)"
done
# The shims' hibernate sockets (outside the state dir for the socket path's length) and the node
# agent's memory images.
[[ -e /run/agent-sandbox-hib ]] && report "hibernate sockets /run/agent-sandbox-hib: $(ls -A /run/agent-sandbox-hib | tr '\n' ' ')"
[[ -e "$dir/node-agent" ]] && report "node agent images $dir/node-agent: $(ls -A "$dir/node-agent/images" 2>/dev/null | tr '\n' ' ')"
# runsc's config and containers' state (down removes the folder; its logs stay in logs/runsc).
[[ -e "$dir/runsc" ]] && report "runsc state $dir/runsc: $(ls -A "$dir/runsc/root" 2>/dev/null | tr '\n' ' ')"
links='sbxdev0|veth|cilium_'
ip -o link show 2>/dev/null | grep -E "$links" | while read -r l; do echo "leftover: link $l"; done
ip -o link show 2>/dev/null | grep -qE "$links" && found=1
for n in /var/run/netns/cni-*; do [[ -e "$n" ]] && report "netns $n"; done
for bin in iptables ip6tables iptables-legacy ip6tables-legacy; do
  command -v "$bin" >/dev/null || continue
  for t in filter nat mangle raw; do
    chains="$("$bin" -w -t "$t" -S 2>/dev/null | awk '$1=="-N" && ($2 ~ /^(KUBE-|CNI-|CILIUM_|SBXDEV-)/) {print $2}')"
    [[ -n "$chains" ]] && report "$bin -t $t chains: $(echo $chains)"
  done
done
# The anti-spoofing CNI plugin's table (internal/devcluster/antispoof); `down` deletes it.
if command -v nft >/dev/null && nft list tables bridge 2>/dev/null | grep -qx 'table bridge agent-sandbox-antispoof'; then
  report "nft table bridge agent-sandbox-antispoof"
fi
grep -F " $dir/" /proc/self/mountinfo | while read -r l; do echo "leftover: mount $l"; done
grep -qF " $dir/" /proc/self/mountinfo && found=1
# The provisioner's nodev,nosuid bind mount of its volume root.
grep -E ' /tmp/hostpath_pv ' /proc/self/mountinfo | while read -r l; do echo "leftover: mount $l"; done
grep -qE ' /tmp/hostpath_pv ' /proc/self/mountinfo && found=1
# Cilium: pins in bpffs, its runtime dir (API socket, state) and cgroup2 mount.
for d in /sys/fs/bpf/cilium /sys/fs/bpf/tc/globals /var/run/cilium; do
  [[ -e "$d" ]] && report "cilium $d"
done
grep -E ' /run/cilium' /proc/self/mountinfo | while read -r l; do echo "leftover: mount $l"; done
grep -qE ' /run/cilium' /proc/self/mountinfo && found=1
for d in /run/containerd /var/lib/cni /tmp/hostpath_pv /var/lib/kubelet /var/log/pods; do
  [[ -e "$d" ]] && report "path $d (fine if it existed before the first 'devcluster up')"
done
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/k8s.io; do
  [[ -e "$d" ]] && report "cgroup $d"
done
# For the eye: these should read as before the first `up` (kernel.unprivileged_bpf_disabled
# stays 1 once Cilium ran: the kernel allows no other value until a reboot).
for s in net.ipv4.ip_forward net.ipv4.conf.all.accept_redirects net.ipv4.conf.all.rp_filter \
  net.ipv4.conf.all.route_localnet net.ipv4.fib_multipath_use_neigh kernel.timer_migration \
  net.bridge.bridge-nf-call-iptables kernel.unprivileged_bpf_disabled; do
  echo "$s=$(sysctl -n "$s" 2>/dev/null)"
done
if grep -qE ' /sys/fs/bpf .* - bpf ' /proc/self/mountinfo; then
  echo "note: bpffs is mounted at /sys/fs/bpf (fine if it was before the first 'devcluster up')"
fi
command -v nft >/dev/null && echo "nft tables: $(nft list tables 2>/dev/null | tr '\n' ' ')"
if [[ $found -eq 0 ]]; then echo clean; fi
exit $found
