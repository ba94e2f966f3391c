#!/usr/bin/env bash
# Kills kube-apiserver of DIR only and starts it again with the same flags
# (DIR/kube-apiserver.args), then waits for /readyz: clients' watches break
# and must be re-established, as when a real apiserver restarts.
#
#   scripts/controlplane/restart-apiserver.sh DIR [DOWN_SECONDS]
#
# DOWN_SECONDS (default 0) keeps it stopped that long first. SIGTERM as a
# normal shutdown; BUNLET_RESTART_SIGNAL=KILL for a crash.
set -euo pipefail
cp_script=restart-apiserver
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -eq 1 || $# -eq 2 ]] || die "usage: $0 DIR [DOWN_SECONDS]"
dir="$(cp_dir "$1")"
down="${2:-0}"
[[ -f "$dir/controlplane.env" && -f "$dir/kube-apiserver.args" ]] || die "$dir is not a started control plane (run up.sh first)"
t0=$(date +%s%N)
cp_lock "$dir"
BIN="$(sed -n 's/^BIN=//p' "$dir/controlplane.env")"

if [[ "${BUNLET_RESTART_SIGNAL:-TERM}" == KILL ]]; then
  if pid="$(running_pid "$dir" kube-apiserver)"; then
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.05; done
  fi
  rm -f "$dir/kube-apiserver.pid"
else
  stop_component "$dir" kube-apiserver 30
fi
log "kube-apiserver stopped in $(ms "$t0") ms"
[[ "$down" == 0 ]] || sleep "$down"
start_component "$dir" "$BIN" kube-apiserver
wait_apiserver "$dir" "${BUNLET_CONTROLPLANE_TIMEOUT:-90}"
log "kube-apiserver restarted in $(ms "$t0") ms"
