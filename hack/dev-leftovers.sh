#!/usr/bin/env bash
# Lists anything of the local dev cluster still on this machine after `dev down`: processes,
# the pod bridge and veths, pod network namespaces, KUBE-*/CNI-* iptables chains, mounts under
# the state dir, host dirs and cgroups the cluster creates, and ip_forward. Exits 1 if any is
# found, 0 (printing "clean") otherwise.
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
ip -o link show 2>/dev/null | grep -E 'sbxdev0|veth' | while read -r l; do echo "leftover: link $l"; done
ip -o link show 2>/dev/null | grep -qE 'sbxdev0|veth' && found=1
for n in /var/run/netns/cni-*; do [[ -e "$n" ]] && report "netns $n"; done
for bin in iptables ip6tables iptables-legacy ip6tables-legacy; do
  command -v "$bin" >/dev/null || continue
  for t in filter nat mangle; do
    chains="$("$bin" -w -t "$t" -S 2>/dev/null | awk '$1=="-N" && ($2 ~ /^(KUBE|CNI)-/) {print $2}')"
    [[ -n "$chains" ]] && report "$bin -t $t chains: $(echo $chains)"
  done
done
grep -F " $dir/" /proc/self/mountinfo | while read -r l; do echo "leftover: mount $l"; done
grep -qF " $dir/" /proc/self/mountinfo && found=1
for d in /run/containerd /var/lib/cni /tmp/hostpath_pv /var/lib/kubelet /var/log/pods; do
  [[ -e "$d" ]] && report "path $d (fine if it existed before the first 'dev up')"
done
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/k8s.io; do
  [[ -e "$d" ]] && report "cgroup $d"
done
echo "ip_forward=$(cat /proc/sys/net/ipv4/ip_forward)"
if [[ $found -eq 0 ]]; then echo clean; fi
exit $found
