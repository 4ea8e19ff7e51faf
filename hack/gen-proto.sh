#!/usr/bin/env bash
# Generates the Go code of proto/**/*.proto into pkg/proto with protoc (Debian's
# protobuf-compiler; installed with apt-get when missing and we are root) and the
# protoc-gen-go / protoc-gen-go-grpc / protoc-gen-connect-go plugins pinned in
# hack/tools/go.mod. Connect code (envd's services) lands in <package>connect/
# next to each package; gRPC code is only generated for services that use it.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v protoc >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "protoc not found; installing Debian's protobuf-compiler" >&2
    # apt-get-waiting.sh waits while another package manager (unattended upgrades) holds apt's locks.
    hack/apt-get-waiting.sh install -y -qq protobuf-compiler >/dev/null ||
      { hack/apt-get-waiting.sh update -qq && hack/apt-get-waiting.sh install -y -qq protobuf-compiler >/dev/null; }
  else
    echo "protoc not found: install protobuf-compiler (apt-get install protobuf-compiler)" >&2
    exit 1
  fi
fi
include=/usr/include
[ -f "$include/google/protobuf/empty.proto" ] || { echo "google/protobuf/empty.proto not found under $include (package protobuf-compiler / libprotobuf-dev)" >&2; exit 1; }

gen_go=$(cd hack/tools && go tool -n protoc-gen-go)
gen_grpc=$(cd hack/tools && go tool -n protoc-gen-go-grpc)
gen_connect=$(cd hack/tools && go tool -n protoc-gen-connect-go)
mkdir -p pkg/proto
# envd's services (proto/envd) are served over Connect; the rest over gRPC.
mapfile -t grpc_files < <(cd proto && find . -name '*.proto' -not -path './envd/*' | sed 's|^\./||' | sort)
mapfile -t connect_files < <(cd proto && find ./envd -name '*.proto' | sed 's|^\./||' | sort)
protoc -I proto -I "$include" \
  --plugin=protoc-gen-go="$gen_go" --plugin=protoc-gen-go-grpc="$gen_grpc" \
  --go_out=pkg/proto --go_opt=paths=source_relative \
  --go-grpc_out=pkg/proto --go-grpc_opt=paths=source_relative \
  "${grpc_files[@]}"
protoc -I proto -I "$include" \
  --plugin=protoc-gen-go="$gen_go" --plugin=protoc-gen-connect-go="$gen_connect" \
  --go_out=pkg/proto --go_opt=paths=source_relative \
  --connect-go_out=pkg/proto --connect-go_opt=paths=source_relative \
  "${connect_files[@]}"
