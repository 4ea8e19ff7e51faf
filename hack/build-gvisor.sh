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

# The shim's start lowers its own oom_score_adj to -999 and fails when it may not: on VMs without
# CAP_SYS_RESOURCE (this one) every gVisor pod then fails with "failed to set OOM Score on shim:
# permission denied" (containerd's restrict_oom_score_adj is the same limit on the runc side). So
# the shim is built from the module's vendor/ with containerd's pkg/sys/oom_linux.go replaced by
# ours (go build -overlay, which refuses files in the module cache), which keeps a score it may
# not lower. The stamp names this change, so that a shim built without it is rebuilt.
SHIM_STAMP="oom-restricted-1"
write_oom_overlay() {
  [[ -f "$SRC_DIR/vendor/modules.txt" ]] || (cd "$SRC_DIR" && go mod vendor)
  cat >"$SRC_DIR/oom_linux.go" <<'EOF'
// Written for agent-sandbox's dev cluster (hack/build-gvisor.sh): the API of containerd's
// pkg/sys OOM helpers, except that lowering a score without CAP_SYS_RESOURCE keeps the score.
package sys

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The kernel's bounds of oom_score_adj.
const (
	OOMScoreAdjMin = -1000
	OOMScoreAdjMax = 1000
)

// AdjustOOMScore sets pid's oom_score_adj, clamped to the kernel's bounds.
func AdjustOOMScore(pid, score int) error {
	return SetOOMScore(pid, min(max(score, OOMScoreAdjMin), OOMScoreAdjMax))
}

// SetOOMScore sets pid's oom_score_adj. A score lower than the process has needs
// CAP_SYS_RESOURCE; without it the process keeps its score.
func SetOOMScore(pid, score int) error {
	if score < OOMScoreAdjMin || score > OOMScoreAdjMax {
		return fmt.Errorf("oom_score_adj %d is outside [%d, %d]", score, OOMScoreAdjMin, OOMScoreAdjMax)
	}
	err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte(strconv.Itoa(score)), 0)
	if errors.Is(err, os.ErrPermission) {
		if cur, rerr := GetOOMScoreAdj(pid); rerr == nil && score < cur {
			return nil
		}
	}
	return err
}

// GetOOMScoreAdj reads pid's oom_score_adj.
func GetOOMScoreAdj(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}
EOF
  printf '{"Replace": {"%s/vendor/github.com/containerd/containerd/v2/pkg/sys/oom_linux.go": "%s/oom_linux.go"}}\n' \
    "$SRC_DIR" "$SRC_DIR" >"$SRC_DIR/overlay.json"
}

build_one() { # output-name package [stamp overlay.json]
  local out="$OUT_DIR/$1" start=$SECONDS stamp="${3:-}" mode=(-mod=mod)
  if [[ -x "$out" && "$(cat "$out.version" 2>/dev/null || true)" == "$stamp" ]]; then return; fi
  [[ -n "${4:-}" ]] && mode=(-mod=vendor -overlay "$4")
  log "building $1 (runsc takes ~2 min on 2 cores when cold)"
  # runsc reports this as its version (runsc --version, the sandbox's logs).
  (cd "$SRC_DIR" && go build -trimpath "${mode[@]}" \
    -ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" -o "$out.tmp" "$2")
  mv "$out.tmp" "$out"
  if [[ -n "$stamp" ]]; then echo "$stamp" >"$out.version"; else rm -f "$out.version"; fi
  log "built $1 in $((SECONDS - start))s"
}

exec 9>"$OUT_DIR/.lock"
flock 9
prepare_module
build_one runsc gvisor.dev/gvisor/runsc
write_oom_overlay
build_one containerd-shim-runsc-v1 gvisor.dev/gvisor/shim "$SHIM_STAMP" "$SRC_DIR/overlay.json"
echo "$OUT_DIR"
