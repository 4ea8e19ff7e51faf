package snapshotlab

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// containerdConfig: no CRI (the lab drives containerd's own API with ctr), everything under Dir.
func (l *Lab) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
oom_score = 0
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, l.path("root"), l.path("state"), l.Socket(), l.Socket()+".ttrpc", l.path("run", "debug.sock"), l.path("opt"))
}

// runscConfig is the shim's options file (ctr run --runtime-config-path): runsc is our wrapper,
// the platform the local cluster uses (systrap), runsc's debug logs per container, and restore
// spec validation as a warning, as the local cluster has it (a new pod's specs differ in gVisor
// annotations that name the pod).
func (l *Lab) runscConfig() string {
	return spec.RunscOptions("", l.path("bin", "runsc"), l.RunscRoot(), "debug", l.path("logs"))
}

// shimConfig is read by the shim's daemon at start from its working directory (the bundle;
// gvisor.dev/gvisor pkg/shim/v1/runsc/options.go GetRuntimeOptions also tries
// /run/containerd/runsc/config.toml and /etc/containerd/runsc/config.toml, which the lab must
// not touch: the local cluster's shims would read them too). It turns the hibernate server on.
func (l *Lab) shimConfig() string {
	return fmt.Sprintf("root = %q\nenable_hibernate_server = true\n", l.RunscRoot())
}

// shimWrapper starts gVisor's shim for containerd 1.6 (as the local cluster's does: containerd
// 1.6 reads a bare address where the shim, built on containerd 2's library, prints JSON) and
// puts the lab's config.toml in the bundle before the shim's daemon starts there.
func (l *Lab) shimWrapper() string {
	return fmt.Sprintf(`#!/bin/sh
shim=%q
for last; do :; done
if [ "$last" != start ]; then exec "$shim" "$@"; fi
cp %q ./config.toml || exit 1
out="$("$shim" "$@")" || { printf '%%s' "$out"; exit 1; }
printf '%%s' "$out" | sed -n 's/^{.*"address":"\([^"]*\)".*}$/\1/p;t;p' | tr -d '\n'
`, filepath.Join(l.GVisorDir, "containerd-shim-runsc-v1"), l.path("shim-config.toml"))
}

// RunscWrapper is the runsc the shim runs. The shim restores only when an extension asks it to
// (none is built in), and it runs `runsc create` then `runsc start` for every container; runsc
// restore of a created container is a start that loads the image instead of running the
// entrypoint (runsc/cmd/restore.go). So `start ID` of a container whose spec carries
// RestoreAnnotation becomes `restore --detach --image-path <value> ID`; all else passes through.
func RunscWrapper(runsc string) string {
	return fmt.Sprintf(`#!/bin/bash
set -euo pipefail
runsc=%q
args=("$@"); n=${#args[@]}
i=0
while (( i < n )) && [[ "${args[i]}" == --* ]]; do i=$((i+1)); done
if (( i + 2 == n )) && [[ "${args[i]}" == start ]]; then
  id=${args[n-1]}; globals=("${args[@]:0:i}")
  bundle=$("$runsc" "${globals[@]}" state "$id" | sed -n 's/^ *"bundle": *"\(.*\)",$/\1/p')
  image=$(grep -o '"%s": *"[^"]*"' "$bundle/config.json" | sed 's/.*: *"\(.*\)"$/\1/' || true)
  if [[ -n "$image" ]]; then
    exec "$runsc" "${globals[@]}" restore --detach --image-path "$image" "$id"
  fi
fi
exec "$runsc" "$@"
`, runsc, RestoreAnnotation)
}

func (l *Lab) writeConfigs() error {
	files := []struct {
		name, data string
		mode       os.FileMode
	}{
		{"containerd.toml", l.containerdConfig(), 0o644},
		{"runsc.toml", l.runscConfig(), 0o644},
		{"shim-config.toml", l.shimConfig(), 0o644},
		{"bin/containerd-shim-runsc-v1", l.shimWrapper(), 0o755},
		{"bin/runsc", RunscWrapper(filepath.Join(l.GVisorDir, "runsc")), 0o755},
	}
	for _, f := range files {
		if err := os.WriteFile(l.path(f.name), []byte(f.data), f.mode); err != nil {
			return err
		}
	}
	return nil
}
