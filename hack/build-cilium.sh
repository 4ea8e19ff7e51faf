#!/usr/bin/env bash
# Builds Cilium (the local cluster's NetworkPolicy engine) from the Go module proxy into a cache
# outside the repo, keyed by version: cilium-agent, cilium-cni, cilium-dbg, plus the module's
# bpf/ tree (the agent compiles it with clang at run time) and its CRDs. Idempotent; one flock
# per version. Cold: ~6 min and ~3 GB of memory on 2 cores (cilium-agent), the rest seconds.
#
#   hack/build-cilium.sh              build what is missing, print the folder
#   hack/build-cilium.sh --print-dir  print the folder that holds the binaries
set -euo pipefail

CILIUM_VERSION="${CILIUM_VERSION:-v1.20.2}"
CACHE_ROOT="${AGENT_SANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox}"
OUT_DIR="$CACHE_ROOT/cilium/$CILIUM_VERSION"
SRC_DIR="$CACHE_ROOT/src/cilium-$CILIUM_VERSION"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$OUT_DIR"
  exit 0
fi

mkdir -p "$OUT_DIR"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}"
log() { echo "[build-cilium $(date +%H:%M:%S)] $*" >&2; }

# Cilium's go.mod replaces controller-tools with its fork and pins a gobgp pseudo-version the
# proxy refuses (403); the tagged v4.7.0 builds.
prepare_module() {
  [[ -f "$SRC_DIR/.ready" ]] && return
  log "preparing build module for github.com/cilium/cilium $CILIUM_VERSION"
  rm -rf "$SRC_DIR" && mkdir -p "$SRC_DIR"
  (
    cd "$SRC_DIR"
    go mod init agent-sandbox/cilium-build >/dev/null 2>&1
    go mod edit -require "github.com/cilium/cilium@$CILIUM_VERSION" \
      -replace sigs.k8s.io/controller-tools=github.com/cilium/controller-tools@v0.21.0-1 \
      -replace github.com/osrg/gobgp/v4=github.com/osrg/gobgp/v4@v4.7.0
    cat >tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "github.com/cilium/cilium/cilium-dbg"
	_ "github.com/cilium/cilium/daemon"
	_ "github.com/cilium/cilium/plugins/cilium-cni"
)
EOF
    go mod tidy >&2
  )
  touch "$SRC_DIR/.ready"
}

build_one() { # output-name package
  local out="$OUT_DIR/$1" start=$SECONDS
  [[ -x "$out" ]] && return
  log "building $1 (cilium-agent takes ~6 min and ~3 GB on 2 cores when cold)"
  # "<version> <revision> <author date>": the agent parses three fields (pkg/version).
  local v="${CILIUM_VERSION#v} $CILIUM_VERSION 1970-01-01T00:00:00+00:00"
  (cd "$SRC_DIR" && go build -trimpath \
    -ldflags "-s -w -X 'github.com/cilium/cilium/pkg/version.ciliumVersion=$v'" -o "$out.tmp" "$2")
  mv "$out.tmp" "$out"
  log "built $1 in $((SECONDS - start))s"
}

copy_tree() { # module-relative-path destination
  local dest="$OUT_DIR/$2"
  [[ -d "$dest" ]] && return
  local mod
  mod="$(cd "$SRC_DIR" && go list -m -f '{{.Dir}}' github.com/cilium/cilium)"
  rm -rf "$dest.tmp" && mkdir -p "$(dirname "$dest")"
  cp -r "$mod/$1" "$dest.tmp" && chmod -R u+w "$dest.tmp"
  mv "$dest.tmp" "$dest"
}

exec 9>"$OUT_DIR/.lock"
flock 9
prepare_module
build_one cilium-agent github.com/cilium/cilium/daemon
build_one cilium-cni github.com/cilium/cilium/plugins/cilium-cni
build_one cilium-dbg github.com/cilium/cilium/cilium-dbg
copy_tree bpf bpf
copy_tree pkg/k8s/apis/cilium.io/client/crds/v2 crds/v2
copy_tree pkg/k8s/apis/cilium.io/client/crds/v2alpha1 crds/v2alpha1
echo "$OUT_DIR"
