#!/usr/bin/env bash
# Stops everything up.sh started under DIR and removes DIR. Idempotent: a
# missing DIR, or one already stopped, is fine.
#
#   scripts/controlplane/down.sh DIR          stop and remove DIR
#   scripts/controlplane/down.sh --keep DIR   stop, keep DIR (logs, certificates, etcd data;
#                                             up.sh DIR starts it again)
#
# Removes DIR only if it is a control-plane directory (has the marker up.sh
# writes), so a wrong argument cannot delete anything else.
set -euo pipefail
cp_script=down
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

keep=0
if [[ "${1:-}" == --keep ]]; then keep=1; shift; fi
[[ $# -eq 1 ]] || die "usage: $0 [--keep] DIR"
dir="$(cp_dir "$1")"
[[ -d "$dir" ]] || exit 0
[[ -f "$dir/$MARKER" ]] || die "$dir is not a control-plane directory (no $MARKER); not touching it"
t0=$(date +%s%N)
cp_lock "$dir"

# Clients first, the store last.
for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
  stop_component "$dir" "${COMPONENTS[i]}" 10
done
# Safety net: anything else still running from this DIR (a lost pid file).
for p in /proc/[0-9]*; do
  pid="${p#/proc/}"
  for n in "${COMPONENTS[@]}"; do
    if is_ours "$pid" "$n" "$dir" && alive "$pid"; then
      log "stray $n ($pid); SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
done

release_ports "$dir"
if ((keep)); then
  log "stopped $dir in $(ms "$t0") ms (kept)"
else
  rm -rf "$dir"
  log "stopped and removed $dir in $(ms "$t0") ms"
fi
