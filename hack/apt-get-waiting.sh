#!/usr/bin/env bash
# apt-get that waits while another package manager holds apt's or dpkg's locks, instead of
# failing: on a fresh cloud VM unattended upgrades hold them for minutes after boot. Says once
# what it waits for and who holds it; gives up after APT_LOCK_WAIT_SECONDS (default 600).
#
#   hack/apt-get-waiting.sh update -qq
#   hack/apt-get-waiting.sh install -y -qq --no-install-recommends socat
#
# apt waits for dpkg's locks itself (DPkg::Lock::Timeout, apt >= 1.9.11; Debian 12 has 2.6), but
# not for the package lists' lock `apt-get update` takes (nor the download cache's): a refusal
# naming a held lock is retried until the deadline. The first try does not wait, so that the
# wait is announced before it starts.
set -uo pipefail

wait_seconds=${APT_LOCK_WAIT_SECONDS:-600}
deadline=$((SECONDS + wait_seconds))
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
# apt's words for a lock another process holds (not for one we may not open: "are you root?").
held='Could not get lock|is another process using it'

timeout=0
while true; do
  apt-get -o DPkg::Lock::Timeout="$timeout" "$@" 2>"$errors"
  status=$?
  if ((status == 0)) || ! grep -Eq "$held" "$errors"; then
    cat "$errors" >&2
    exit "$status"
  fi
  if ((SECONDS >= deadline)); then
    echo "[apt-get] gave up after ${wait_seconds}s waiting for another package manager:" >&2
    cat "$errors" >&2
    exit "$status"
  fi
  if ((timeout == 0)); then
    echo "[apt-get] waiting up to ${wait_seconds}s for another package manager: $(grep -Em1 "$held" "$errors" | sed 's/^E: //')" >&2
  fi
  sleep 2
  timeout=$((deadline - SECONDS))
  ((timeout > 0)) || timeout=1
done
