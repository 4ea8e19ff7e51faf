#!/usr/bin/env bash
# Builds gVisor (the dev cluster's sandbox runtime) from the Go module proxy into a cache outside
# the repo, keyed by version: runsc and containerd-shim-runsc-v1 (the package
# gvisor.dev/gvisor/shim), static (CGO_ENABLED=0). Idempotent; one flock per version. Cold: about
# 2 minutes on 2 cores once the modules are downloaded (runsc ~1m45, the shim ~20 s).
#
#   hack/build-gvisor.sh              build what is missing, print the folder
#   hack/build-gvisor.sh --print-dir  print the folder that holds the binaries
#
# gVisor publishes no tags to the proxy, only pseudo-versions of its Go branch; the pin is one.
set -euo pipefail

GVISOR_VERSION="${GVISOR_VERSION:-v0.0.0-20260905035102-160fafc42237}"
CACHE_ROOT="${AGENT_SANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox}"
OUT_DIR="$CACHE_ROOT/gvisor/$GVISOR_VERSION"
SRC_DIR="$CACHE_ROOT/src/gvisor-$GVISOR_VERSION"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$OUT_DIR"
  exit 0
fi

mkdir -p "$OUT_DIR"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}"
log() { echo "[build-gvisor $(date +%H:%M:%S)] $*" >&2; }

# A throwaway module with both commands as tools, so that go.sum covers every package they import.
prepare_module() {
  [[ -f "$SRC_DIR/.ready" ]] && return
  log "preparing build module for gvisor.dev/gvisor $GVISOR_VERSION"
  local start=$SECONDS
  rm -rf "$SRC_DIR" && mkdir -p "$SRC_DIR"
  (
    cd "$SRC_DIR"
    go mod init agent-sandbox/gvisor-build >/dev/null 2>&1
    go get -tool "gvisor.dev/gvisor/runsc@$GVISOR_VERSION" "gvisor.dev/gvisor/shim@$GVISOR_VERSION" >&2
  )
  touch "$SRC_DIR/.ready"
  log "module ready in $((SECONDS - start))s"
}

build_one() { # output-name package
  local out="$OUT_DIR/$1" start=$SECONDS
  [[ -x "$out" ]] && return
  log "building $1 (runsc takes ~2 min on 2 cores when cold)"
  # runsc reports this as its version (runsc --version, the sandbox's logs).
  (cd "$SRC_DIR" && go build -trimpath \
    -ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" -o "$out.tmp" "$2")
  mv "$out.tmp" "$out"
  log "built $1 in $((SECONDS - start))s"
}

exec 9>"$OUT_DIR/.lock"
flock 9
prepare_module
build_one runsc gvisor.dev/gvisor/runsc
build_one containerd-shim-runsc-v1 gvisor.dev/gvisor/shim
echo "$OUT_DIR"
