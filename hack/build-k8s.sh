#!/usr/bin/env bash
# Builds pinned Kubernetes test binaries from the Go module proxy into a cache outside the repo,
# keyed by version. Idempotent: a binary already in the cache is not rebuilt. Safe to run
# concurrently (one flock per version).
#
#   hack/build-k8s.sh [BINARY...]     default: kube-apiserver etcd kube-controller-manager
#   hack/build-k8s.sh --print-dir     prints the folder that holds the binaries
#
# Known binaries: kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy
# etcd kwok helm (helm renders and lints charts/agent-sandbox in the tests) coredns (the dev
# cluster's DNS, packed as an image). `cilium` hands over to hack/build-cilium.sh, which builds
# cilium-agent, cilium-cni and cilium-dbg into their own folder (--print-dir there).
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
HELM_VERSION="${HELM_VERSION:-v3.21.4}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
CACHE_ROOT="${AGENT_SANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-sandbox}"
BIN_DIR="$CACHE_ROOT/k8s/$K8S_VERSION"
SRC_DIR="$CACHE_ROOT/src"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$BIN_DIR"
  exit 0
fi

bins=("$@")
if [[ ${#bins[@]} -eq 0 ]]; then
  bins=(kube-apiserver etcd kube-controller-manager)
fi

mkdir -p "$BIN_DIR" "$SRC_DIR"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}"

log() { echo "[build-k8s $(date +%H:%M:%S)] $*" >&2; }

# The throwaway module that builds k8s.io/kubernetes commands: every staging module replaced by
# its published v0.<minor>.<patch> twin, as the kubernetes go.mod points at ./staging otherwise.
prepare_k8s_module() {
  local dir="$SRC_DIR/kubernetes-$K8S_VERSION"
  if [[ -f "$dir/.ready" ]]; then echo "$dir"; return; fi
  log "preparing build module for k8s.io/kubernetes $K8S_VERSION"
  rm -rf "$dir" && mkdir -p "$dir"
  local gomod staging_version="v0.${K8S_VERSION#v1.}"
  gomod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "$gomod" ]] || { log "cannot download k8s.io/kubernetes@$K8S_VERSION go.mod"; exit 1; }
  (
    cd "$dir"
    go mod init agent-sandbox/k8s-build >/dev/null 2>&1
    # sample-* modules are not needed by any binary and are not served by the proxy.
    grep -oE '^\s*k8s.io/[a-z0-9-]+ => \./staging/src/k8s.io/[a-z0-9-]+' "$gomod" \
      | awk '{print $1}' | grep -v -E '^k8s.io/sample-' | sort -u \
      | while read -r m; do go mod edit -replace "$m=$m@$staging_version"; done
    go get "k8s.io/kubernetes@$K8S_VERSION" >&2
  )
  touch "$dir/.ready"
  echo "$dir"
}

prepare_tool_module() { # name module@version
  local dir="$SRC_DIR/$1"
  if [[ -f "$dir/.ready" ]]; then echo "$dir"; return; fi
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && go mod init "agent-sandbox/$1-build" >/dev/null 2>&1 && go get -tool "$2" >&2)
  touch "$dir/.ready"
  echo "$dir"
}

k8s_ldflags() {
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local f="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  echo "$f"
}

build_one() {
  local bin="$1" out="$BIN_DIR/$1"
  # Tools not versioned with Kubernetes carry their version in a stamp next to them.
  local stamp=""
  [[ "$bin" == helm ]] && stamp="$HELM_VERSION"
  [[ "$bin" == coredns ]] && stamp="$COREDNS_VERSION"
  if [[ -x "$out" && "$(cat "$out.version" 2>/dev/null || true)" == "$stamp" ]]; then return; fi
  local start=$SECONDS dir pkg ldflags=""
  case "$bin" in
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl|kube-proxy)
      dir="$(prepare_k8s_module)"; pkg="k8s.io/kubernetes/cmd/$bin"; ldflags="$(k8s_ldflags)"
      [[ "$bin" == kubectl ]] && pkg="k8s.io/kubernetes/cmd/kubectl"
      ;;
    etcd)
      dir="$(prepare_tool_module "etcd-$ETCD_VERSION" "go.etcd.io/etcd/server/v3@$ETCD_VERSION")"
      pkg="go.etcd.io/etcd/server/v3"; ldflags="-s -w"
      ;;
    kwok)
      dir="$(prepare_tool_module "kwok-$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")"
      pkg="sigs.k8s.io/kwok/cmd/kwok"; ldflags="-s -w"
      ;;
    helm)
      dir="$(prepare_tool_module "helm-$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")"
      pkg="helm.sh/helm/v3/cmd/helm"
      ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
      ;;
    coredns)
      # Its root package is the main package; the default plugin set (kubernetes, template…).
      dir="$(prepare_tool_module "coredns-$COREDNS_VERSION" "github.com/coredns/coredns@$COREDNS_VERSION")"
      pkg="github.com/coredns/coredns"
      ldflags="-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
      ;;
    *) log "unknown binary: $bin"; exit 2 ;;
  esac
  log "building $bin (first build of kube-apiserver takes ~6 min on 2 cores)"
  # go.sum needs entries for every package the command imports, not just the module.
  if [[ "$pkg" == k8s.io/kubernetes/* ]]; then (cd "$dir" && go get "$pkg@$K8S_VERSION" 2>&1 | grep -v '^go: ' >&2 || true); fi
  (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  if [[ -n "$stamp" ]]; then echo "$stamp" > "$out.version"; else rm -f "$out.version"; fi
  log "built $bin in $((SECONDS - start))s"
}

# kwok refuses to start without Stage objects; the stock ones ship in its module.
copy_kwok_stages() {
  [[ -d "$BIN_DIR/kwok-stages" ]] && return
  local dir mod
  dir="$(prepare_tool_module "kwok-$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")"
  mod="$(cd "$dir" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  cp -r "$mod/kustomize/stage" "$BIN_DIR/kwok-stages.tmp" && chmod -R u+w "$BIN_DIR/kwok-stages.tmp"
  mv "$BIN_DIR/kwok-stages.tmp" "$BIN_DIR/kwok-stages"
}

exec 9>"$BIN_DIR/.lock"
flock 9
for b in "${bins[@]}"; do
  if [[ "$b" == cilium ]]; then "$(dirname "$0")/build-cilium.sh" >/dev/null; continue; fi
  build_one "$b"
  if [[ "$b" == kwok ]]; then copy_kwok_stages; fi
done
echo "$BIN_DIR"
