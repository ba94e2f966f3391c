# Shared by up.sh, down.sh and restart-apiserver.sh (sourced, not run).
#
# Layout of a control-plane DIR:
#   .bunlet-controlplane     marker: down.sh removes only directories that have it
#   controlplane.env         versions, ports, URLs, paths (KEY=VALUE, sourced by scripts)
#   pki/ kubeconfig/         from pki.sh
#   etcd/                    etcd's data dir
#   NAME.args                one flag per line, what NAME was started with (restarts reuse it)
#   NAME.pid NAME.log        for etcd, kube-apiserver, kube-controller-manager, kube-scheduler
#   .lock                    held while a script changes this DIR
# shellcheck shell=bash disable=SC2034

cp_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
MARKER=.bunlet-controlplane

log() { echo "controlplane/${cp_script:-lib}: $*" >&2; }
die() { log "$*"; exit 1; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# cp_dir ARG: the absolute DIR (plain characters only: it goes into flags,
# kubeconfigs and /proc matching).
cp_dir() {
  local d
  d="$(realpath -m "$1")"
  [[ "$d" =~ ^/[A-Za-z0-9._/-]+$ ]] || die "DIR must match [A-Za-z0-9._/-]: $d"
  [[ "$d" != / ]] || die "refusing DIR=/"
  echo "$d"
}

# cp_lock DIR: hold DIR/.lock (fd 9) until the script exits. Children that
# outlive the script must be started with 9>&- (start_component does).
cp_lock() {
  exec 9>"$1/.lock"
  flock -w 300 9 || die "timed out waiting for $1/.lock"
}

# A process that exited but is not reaped yet is a zombie: dead for us.
alive() {
  local st
  st="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$st" && "$st" != Z ]]
}

# is_ours PID NAME DIR: PID is NAME started for DIR (its command line names
# the binary and a path under DIR), so a recycled pid is never signalled.
is_ours() {
  local cmd
  cmd="$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline")" || return 1
  [[ "$cmd" == */"$2"\ * && "$cmd" == *"$3/"* ]]
}

# running_pid DIR NAME: prints the pid of DIR's NAME if it runs.
running_pid() {
  local pid
  pid="$(cat "$1/$2.pid" 2>/dev/null)" || return 1
  [[ -n "$pid" ]] && alive "$pid" && is_ours "$pid" "$2" "$1" || return 1
  echo "$pid"
}

# start_component DIR BIN NAME: starts BIN/NAME with the flags in DIR/NAME.args,
# in its own session (it outlives the caller; a test runner killing its
# process group does not reach it), output appended to DIR/NAME.log.
start_component() {
  local dir="$1" bin="$2" name="$3" args
  mapfile -t args <"$dir/$name.args"
  echo "=== $(date -u +%FT%TZ) starting $name" >>"$dir/$name.log"
  setsid "$bin/$name" "${args[@]}" >>"$dir/$name.log" 2>&1 </dev/null 9>&- &
  local pid=$! i
  echo "$pid" >"$dir/$name.pid"
  # Until the child has exec'd, its cmdline is still this shell's and
  # running_pid would call it exited (seen once on a loaded machine: "kube-apiserver
  # exited" with nothing in its log): wait for the exec, or for it to die.
  for ((i = 0; i < 200; i++)); do
    is_ours "$pid" "$name" "$dir" && return 0
    alive "$pid" || return 0
    sleep 0.05
  done
}

# stop_component DIR NAME [SECONDS]: SIGTERM, then SIGKILL after SECONDS
# (default 10); waits until the process is gone.
stop_component() {
  local dir="$1" name="$2" grace="${3:-10}" pid i
  pid="$(running_pid "$dir" "$name")" || { rm -f "$dir/$name.pid"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then
    log "$name ($pid) ignored SIGTERM for ${grace}s; SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
  fi
  rm -f "$dir/$name.pid"
}

# kubectl_admin DIR ARGS...: kubectl as the cluster admin of DIR.
kubectl_admin() {
  local dir="$1"; shift
  "$BIN/kubectl" --kubeconfig "$dir/kubeconfig/admin.kubeconfig" "$@"
}

# wait_apiserver DIR SECONDS: until `kubectl get --raw /readyz` says ok;
# fails early (with the log's tail) if kube-apiserver or etcd died.
wait_apiserver() {
  local dir="$1" secs="$2" t deadline n
  t=$(date +%s%N)
  deadline=$(( $(date +%s) + secs ))
  while :; do
    if [[ "$(kubectl_admin "$dir" get --raw /readyz --request-timeout=2s 2>/dev/null)" == ok ]]; then
      log "kube-apiserver ready in $(ms "$t") ms"
      return 0
    fi
    for n in etcd kube-apiserver; do
      running_pid "$dir" "$n" >/dev/null || { tail -n 30 "$dir/$n.log" >&2; die "$n exited (log: $dir/$n.log)"; }
    done
    (( $(date +%s) < deadline )) || { tail -n 30 "$dir/kube-apiserver.log" >&2; die "kube-apiserver not ready after ${secs}s (log: $dir/kube-apiserver.log)"; }
    sleep 0.2
  done
}

# listening PORT: something listens on 127.0.0.1:PORT.
listening() { [[ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]]; }

# Ports claimed by control planes on this host (a file per port naming its
# DIR), so that instances started at the same time never pick the same one.
PORTS_DIR="${TMPDIR:-/tmp}/bunlet-controlplane-ports"

# claim_ports DIR N: prints N free ports (20000-31999: below the ephemeral
# range, so outgoing connections do not take them) and claims them for DIR.
claim_ports() {
  local dir="$1" n="$2" got=() p owner tries=0
  mkdir -p "$PORTS_DIR"
  exec 8>"$PORTS_DIR/.lock"
  flock -w 60 8 || die "timed out waiting for $PORTS_DIR/.lock"
  while ((${#got[@]} < n)); do
    ((tries++ < 2000)) || die "no free ports found"
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
    [[ " ${got[*]} " == *" $p "* ]] && continue
    if [[ -f "$PORTS_DIR/$p" ]]; then
      owner="$(cat "$PORTS_DIR/$p")"
      # A claim stands while its DIR still names the port.
      [[ "$owner" != "$dir" ]] && grep -qs "=$p\$" "$owner/controlplane.env" && continue
    fi
    listening "$p" && continue
    got+=("$p")
  done
  for p in "${got[@]}"; do echo "$dir" >"$PORTS_DIR/$p"; done
  exec 8>&-
  echo "${got[*]}"
}

release_ports() {
  local dir="$1" f
  for f in "$PORTS_DIR"/[0-9]*; do
    [[ -f "$f" && "$(cat "$f" 2>/dev/null)" == "$dir" ]] && rm -f "$f"
  done
  return 0
}
