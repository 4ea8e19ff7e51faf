#!/usr/bin/env bash
# Installs the Debian packages the local cluster's node needs (containerd, runc, the CNI plugins,
# a static busybox and python3 for the images, iptables, nftables, conntrack, socat, and clang-19/llvm-19
# with which the Cilium agent compiles its BPF programs) when any is missing. Idempotent:
# with everything present it changes nothing and exits 0 quickly.
#
#   hack/install-node-deps.sh           install what is missing
#   hack/install-node-deps.sh --check   exit 1 (listing what is missing) instead of installing
set -euo pipefail

# package -> a file it provides, so the check needs neither dpkg nor apt.
declare -A want=(
  [containerd]=/usr/bin/containerd
  [runc]=/usr/sbin/runc
  [containernetworking-plugins]=/usr/lib/cni/bridge
  [busybox-static]=/bin/busybox
  [iptables]=/usr/sbin/iptables
  # nft: the anti-spoofing CNI plugin (cmd/cni-antispoof) writes each pod's rules with it, and
  # `devcluster down` removes its table and the empty ones iptables-nft leaves (Cilium's `ip raw`).
  [nftables]=/usr/sbin/nft
  [conntrack]=/usr/sbin/conntrack
  [socat]=/usr/bin/socat
  [iproute2]=/usr/sbin/ip
  [util-linux]=/usr/bin/nsenter
  # Copied with its stdlib and libraries into the runtime image, so sandboxes have python3.
  [python3]=/usr/bin/python3
  # cilium-agent compiles bpf/*.c at run time and needs clang >= 18; the dev cluster puts
  # clang/llc links to these on the agent's PATH (Debian 12's default clang is 14).
  [clang-19]=/usr/bin/clang-19
  [llvm-19]=/usr/bin/llc-19
)

missing=()
for pkg in "${!want[@]}"; do
  [[ -e "${want[$pkg]}" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "[install-node-deps] all present"
  exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
  echo "[install-node-deps] missing: ${missing[*]}" >&2
  exit 1
fi
if [[ $EUID -ne 0 ]]; then
  echo "[install-node-deps] need root to install: ${missing[*]}" >&2
  exit 1
fi

echo "[install-node-deps] installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Waits (bounded, saying for whom) while another package manager, e.g. unattended upgrades on a
# freshly booted VM, holds apt's locks.
apt_get="$(dirname "$0")/apt-get-waiting.sh"
# The package lists may be absent on a fresh machine; refresh them once before installing.
"$apt_get" update -qq
# No recommends: they would pull docker-adjacent services we never start.
"$apt_get" install -y -qq --no-install-recommends "${missing[@]}"
echo "[install-node-deps] done"
