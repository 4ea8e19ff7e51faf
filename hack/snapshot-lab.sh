#!/usr/bin/env bash
# Runs the gVisor checkpoint/restore lab (internal/devcluster/snapshotlab, docs/snapshots.md) as
# root: a containerd of its own under a temp dir, gVisor's shim and runsc from hack/build-gvisor.sh.
# It does not touch the local cluster and leaves nothing behind (check: mount | grep snaplab).
#
#   hack/snapshot-lab.sh           what survives a checkpoint and restore (64 MiB), and how restores fail (~1 min)
#   hack/snapshot-lab.sh cost      the cost table: SNAPSHOT_LAB_SIZES (MiB, default 64,256,1024),
#                                  SNAPSHOT_LAB_RUNS each (default 3), SNAPSHOT_LAB_COMPRESSION
#                                  (none | flate-best-speed); a few minutes
set -euo pipefail
cd "$(dirname "$0")/.."
hack/build-gvisor.sh >/dev/null
case "${1:-state}" in
  state) run='(TestCheckpointRestoreKeepsTheSandboxsState|TestPodCheckpointRestore|TestRestoreOutcomes|TestTheNodeAgentSavesAPodAndTheWrapperRestoresIt)' ;;
  cost) run='TestCheckpointRestoreCost' ;;
  *) echo "usage: $0 [state|cost]" >&2; exit 2 ;;
esac
SNAPSHOT_LAB=1 exec go test -count=1 -timeout 60m -v -run "^${run}\$" ./internal/devcluster/snapshotlab/
