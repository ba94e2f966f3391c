#!/usr/bin/env bash
# A private containerd for integration tests, everything under one directory
# so several instances run side by side: Debian's containerd 1.6 and runc by
# default, or containerd 2.x and runc built from Go modules
# (scripts/containerd2/build.sh) with BUNLET_RUNTIME=containerd2.
#
#   scripts/containerd.sh start DIR     start (or find running), import images
#   scripts/containerd.sh stop DIR      stop containerd only; containers and
#                                       their shims keep running
#   scripts/containerd.sh restart DIR   stop + start with the same config,
#                                       socket and network (runtime restart)
#   scripts/containerd.sh purge DIR     (= stop --purge DIR) kill containerd,
#                                       every container and shim of this DIR,
#                                       its iptables rules, bridge, cgroups and
#                                       mounts, then remove DIR
#
# Layout of DIR: containerd.sock, config.toml, containerd.pid, containerd.log,
# network.env (bridge/subnet/network name chosen on first start), root/,
# state/ (netns mounts live here too), runc/ (runc --root), opt/,
# cni/net.d/10-bunlet.conflist, cni/ipam/ (host-local dataDir).
#
# Environment (read on first start of a DIR, then kept in DIR/runtime.env and
# DIR/network.env):
#   BUNLET_RUNTIME      containerd16 (default: containerd, runc and ctr from
#                       PATH, Debian's 1.6) or containerd2 (containerd 2.x and
#                       runc from scripts/containerd2/build.sh, built on first
#                       use: about 10 minutes cold, then cached)
#   BUNLET_CNI_BRIDGE   bridge name   (default bl<8 hex of sha256(DIR)>)
#   BUNLET_CNI_SUBNET   pod subnet    (default 10.<64..127>.<0..255>.0/24 from the hash)
#   BUNLET_CGROUP_PARENT  cgroup parent the agent uses; purge removes what is
#                         left under it in every hierarchy (kept in DIR/cgroup-parent)
#   CONTAINERD_LOG_LEVEL  containerd log level (default info)
#
# Facts this relies on (see /work/shared/NOTES.md): restrict_oom_score_adj
# must be on (no CAP_SYS_RESOURCE here); cgroups v1 with the cgroupfs driver;
# no registry, so images come from scripts/images.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
images_dir="${BUNLET_IMAGES_DIR:-$repo/.cache/images}"
CNI_BIN_DIR=/usr/lib/cni
mapfile -t image_names < <("$here/images.sh" --names)
PAUSE_IMAGE="${image_names[0]}"

log() { echo "containerd.sh: $*" >&2; }
die() { log "$*"; exit 1; }

usage() { die "usage: $0 start|stop|restart|purge DIR   (stop --purge DIR = purge DIR)"; }

cmd="${1:-}"; shift || true
if [[ "$cmd" == stop && "${1:-}" == --purge ]]; then cmd=purge; shift; fi
[[ $# -eq 1 ]] || usage
dir="$(realpath -m "$1")"
# Paths go into TOML strings, sed expressions and /proc/self/mountinfo
# matching: keep them plain.
[[ "$dir" =~ ^/[A-Za-z0-9._/-]+$ ]] || die "DIR must match [A-Za-z0-9._/-]: $dir"
[[ "$dir" != / ]] || die "refusing DIR=/"
sock="$dir/containerd.sock"
# sun_path is 108 bytes; containerd also listens on SOCK.ttrpc.
(( ${#sock} + 6 < 108 )) || die "socket path too long (${#sock} chars): $sock"
pidfile="$dir/containerd.pid"

# Which runtime this DIR runs: chosen on its first start, then kept, so that
# stop, restart and purge use the same binaries.
CONTAINERD=containerd CTR=ctr RUNC=runc RUNTIME=containerd16 RUNTIME_BIN=
choose_runtime() {
  local envf="$dir/runtime.env" runtime bin=""
  if [[ -f "$envf" ]]; then
    # shellcheck disable=SC1090
    source "$envf"
  else
    [[ "$cmd" == start ]] || return 0 # nothing started here yet: PATH's binaries
    runtime="${BUNLET_RUNTIME:-containerd16}"
    case "$runtime" in
      containerd16) ;;
      containerd2) bin="$(bash "$here/containerd2/build.sh")" || die "building containerd 2.x failed" ;;
      *) die "BUNLET_RUNTIME must be containerd16 or containerd2, not: $runtime" ;;
    esac
    mkdir -p "$dir"
    printf 'RUNTIME=%s\nRUNTIME_BIN=%s\n' "$runtime" "$bin" >"$envf"
    RUNTIME="$runtime" RUNTIME_BIN="$bin"
  fi
  if [[ -n "$RUNTIME_BIN" ]]; then
    CONTAINERD="$RUNTIME_BIN/containerd" CTR="$RUNTIME_BIN/ctr" RUNC="$RUNTIME_BIN/runc"
    # The shim is found on PATH (containerd looks there for containerd-shim-runc-v2).
    export PATH="$RUNTIME_BIN:$PATH"
  fi
}

# A process that exited but is not reaped yet is a zombie: dead for us.
# (PID 1 on these machines reaps orphans late, up to seconds after exit.)
alive() {
  local st
  st="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$st" && "$st" != Z ]]
}

running_pid() {
  local pid
  [[ -f "$pidfile" ]] || return 1
  pid="$(cat "$pidfile")"
  [[ -n "$pid" ]] && alive "$pid" && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == containerd ]] || return 1
  echo "$pid"
}

# Pick (once per DIR) a bridge, subnet and network name unlikely to clash with
# another instance: derived from a hash of DIR, moved on while the subnet is
# already routed on this host.
choose_network() {
  local envf="$dir/network.env"
  if [[ -f "$envf" ]]; then return; fi
  local h bridge subnet name i=0
  h="$(printf '%s' "$dir" | sha256sum | cut -c1-16)"
  name="bunlet-${h:0:8}"
  bridge="${BUNLET_CNI_BRIDGE:-bl${h:0:8}}"
  if [[ -n "${BUNLET_CNI_SUBNET:-}" ]]; then
    subnet="$BUNLET_CNI_SUBNET"
  else
    local n=$(( 16#${h:8:8} ))
    while :; do
      subnet="10.$(( 64 + (n >> 8) % 64 )).$(( n % 256 )).0/24"
      grep -q "^${subnet%/*}/" <<<"$(ip -4 route show)" || break # (no pipe: see wait_ready)
      n=$(( n + 1 )); i=$(( i + 1 ))
      (( i < 256 )) || die "no free 10.64.0.0/10 /24 subnet"
    done
  fi
  (( ${#bridge} <= 15 )) || die "bridge name longer than 15: $bridge"
  printf 'CNI_NETWORK=%s\nCNI_BRIDGE=%s\nCNI_SUBNET=%s\n' "$name" "$bridge" "$subnet" >"$envf"
}

write_cni_config() {
  mkdir -p "$dir/cni/net.d" "$dir/cni/ipam"
  # Loopback: containerd's CRI adds its own "lo" network from the loopback
  # plugin in bin_dir (go-cni WithLoNetwork), so it is not chained here.
  cat >"$dir/cni/net.d/10-bunlet.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni/ipam",
        "ranges": [[{ "subnet": "$CNI_SUBNET" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
}

write_containerd_config() {
  if [[ "${RUNTIME:-containerd16}" == containerd2 ]]; then write_containerd2_config; return; fi
  local cfg="$dir/config.toml"
  containerd config default >"$cfg.tmp"
  # Each edit must hit: the check below fails loudly if the default changes.
  # Plugins that cannot work here (or are unused) are disabled: it also
  # trims the startup log.
  sed -i \
    -e 's|^disabled_plugins = \[\]|disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]|' \
    -e "s|^root = \"/var/lib/containerd\"|root = \"$dir/root\"|" \
    -e "s|^state = \"/run/containerd\"|state = \"$dir/state\"|" \
    -e "s|^  address = \"/run/containerd/containerd.sock\"|  address = \"$sock\"|" \
    -e "s|^  level = \"\"|  level = \"${CONTAINERD_LOG_LEVEL:-info}\"|" \
    -e 's|^    restrict_oom_score_adj = false|    restrict_oom_score_adj = true|' \
    -e "s|^    sandbox_image = .*|    sandbox_image = \"$PAUSE_IMAGE\"|" \
    -e 's|^    netns_mounts_under_state_dir = false|    netns_mounts_under_state_dir = true|' \
    -e "s|^      bin_dir = \"/opt/cni/bin\"|      bin_dir = \"$CNI_BIN_DIR\"|" \
    -e "s|^      conf_dir = \"/etc/cni/net.d\"|      conf_dir = \"$dir/cni/net.d\"|" \
    -e "s|^            Root = \"\"|            Root = \"$dir/runc\"|" \
    -e 's|^            SystemdCgroup = true|            SystemdCgroup = false|' \
    -e "s|^    path = \"/opt/containerd\"|    path = \"$dir/opt\"|" \
    "$cfg.tmp"
  local want
  for want in \
    "root = \"$dir/root\"" "state = \"$dir/state\"" "address = \"$sock\"" \
    'restrict_oom_score_adj = true' "sandbox_image = \"$PAUSE_IMAGE\"" \
    'netns_mounts_under_state_dir = true' "bin_dir = \"$CNI_BIN_DIR\"" \
    "conf_dir = \"$dir/cni/net.d\"" "Root = \"$dir/runc\"" 'SystemdCgroup = false' \
    "path = \"$dir/opt\"" 'io.containerd.snapshotter.v1.btrfs"'; do
    grep -qF "$want" "$cfg.tmp" || die "config edit did not apply: $want (containerd config default changed?)"
  done
  mv "$cfg.tmp" "$cfg"
}

# containerd 2.x: its own default (config version 3 and later; CRI split into
# io.containerd.cri.v1.images and io.containerd.cri.v1.runtime, the sandbox
# image as pinned_images.sandbox, cni.bin_dirs a list, ttrpc and NRI sockets
# of their own), edited as the 1.6 one. NRI is off: its socket is a fixed
# host path that side-by-side instances would fight over.
write_containerd2_config() {
  local cfg="$dir/config.toml"
  "$CONTAINERD" config default >"$cfg.tmp"
  sed -i \
    -e "s|^disabled_plugins = \[\]|disabled_plugins = ['io.containerd.snapshotter.v1.btrfs', 'io.containerd.snapshotter.v1.devmapper', 'io.containerd.snapshotter.v1.zfs', 'io.containerd.snapshotter.v1.blockfile', 'io.containerd.snapshotter.v1.erofs', 'io.containerd.differ.v1.erofs', 'io.containerd.tracing.processor.v1.otlp', 'io.containerd.internal.v1.tracing']|" \
    -e "s|^imports = .*|imports = []|" \
    -e "s|^root = '/var/lib/containerd'|root = '$dir/root'|" \
    -e "s|^state = '/run/containerd'|state = '$dir/state'|" \
    -e "s|^    address = '/run/containerd/containerd.sock'|    address = '$sock'|" \
    -e "s|^    address = '/run/containerd/containerd.sock.ttrpc'|    address = '$sock.ttrpc'|" \
    -e "s|^  level = ''|  level = '${CONTAINERD_LOG_LEVEL:-info}'|" \
    -e 's|^    restrict_oom_score_adj = false|    restrict_oom_score_adj = true|' \
    -e "s|^      sandbox = '.*'|      sandbox = '$PAUSE_IMAGE'|" \
    -e 's|^    netns_mounts_under_state_dir = false|    netns_mounts_under_state_dir = true|' \
    -e "s|^      bin_dirs = \['/opt/cni/bin'\]|      bin_dirs = ['$CNI_BIN_DIR']|" \
    -e "s|^      conf_dir = '/etc/cni/net.d'|      conf_dir = '$dir/cni/net.d'|" \
    -e "s|^            BinaryName = ''|            BinaryName = '$RUNC'|" \
    -e "s|^            Root = ''|            Root = '$dir/runc'|" \
    -e 's|^            SystemdCgroup = true|            SystemdCgroup = false|' \
    -e "s|^    path = '/opt/containerd'|    path = '$dir/opt'|" \
    -e "s|^    bin_dir = '/opt/containerd/image-verifier/bin'|    bin_dir = '$dir/opt/image-verifier/bin'|" \
    -e "/^  \[plugins.'io.containerd.nri.v1.nri'\]/,/^  \[/ s|^    disable = false|    disable = true|" \
    "$cfg.tmp"
  local want
  for want in \
    'imports = []' "root = '$dir/root'" "state = '$dir/state'" "address = '$sock'" "address = '$sock.ttrpc'" \
    'restrict_oom_score_adj = true' "sandbox = '$PAUSE_IMAGE'" \
    'netns_mounts_under_state_dir = true' "bin_dirs = ['$CNI_BIN_DIR']" \
    "conf_dir = '$dir/cni/net.d'" "BinaryName = '$RUNC'" "Root = '$dir/runc'" 'SystemdCgroup = false' \
    "path = '$dir/opt'" "'io.containerd.snapshotter.v1.btrfs'" '    disable = true'; do
    grep -qF "$want" "$cfg.tmp" || die "config edit did not apply: $want (containerd 2.x config default changed?)"
  done
  mv "$cfg.tmp" "$cfg"
}

wait_ready() {
  local pid="$1" i
  for ((i = 0; i < 200; i++)); do
    if "$CTR" -a "$sock" version >/dev/null 2>&1; then
      # containerd serves even when a plugin failed to load: the CRI plugin
      # is the one the agent needs, so its failure is a startup failure.
      # The list is read whole before grep: with pipefail, `ctr ... | grep -q` fails when
      # grep stops at the match and ctr, still writing, dies of SIGPIPE (containerd 2.x
      # lists the CRI plugin 8 lines before the end: 5 of 200 checks failed so).
      local plugins
      plugins="$("$CTR" -a "$sock" plugins ls 2>/dev/null)" || plugins=""
      if ! grep -qE '^io\.containerd\.grpc\.v1 +cri +.* ok *$' <<<"$plugins"; then
        grep -E 'level=(error|warning)' "$dir/containerd.log" | tail -n 10 >&2 || true
        kill -TERM "$pid" 2>/dev/null || true
        die "containerd's CRI plugin did not load (log: $dir/containerd.log)"
      fi
      return 0
    fi
    if ! alive "$pid"; then
      tail -n 30 "$dir/containerd.log" >&2 || true
      die "containerd exited during startup (log: $dir/containerd.log)"
    fi
    sleep 0.1
  done
  tail -n 30 "$dir/containerd.log" >&2 || true
  die "containerd did not answer on $sock within 20s"
}

import_images() {
  local f
  for f in pause busybox; do
    "$CTR" -a "$sock" -n k8s.io images import "$images_dir/$f.tar" >/dev/null ||
      die "importing $images_dir/$f.tar failed"
  done
}

do_start() {
  local pid t0
  t0=$(date +%s%N)
  if pid="$(running_pid)"; then
    log "already running (pid $pid) on $sock"
    return 0
  fi
  command -v "$CONTAINERD" >/dev/null || die "containerd not installed (run scripts/setup.sh)"
  command -v "$RUNC" >/dev/null || die "runc not installed (run scripts/setup.sh)"
  [[ -x "$CNI_BIN_DIR/bridge" ]] || die "CNI plugins missing in $CNI_BIN_DIR (run scripts/setup.sh)"
  mkdir -p "$dir"
  "$here/images.sh" "$images_dir"
  choose_network
  # shellcheck disable=SC1091
  source "$dir/network.env"
  write_cni_config
  write_containerd_config
  if [[ -n "${BUNLET_CGROUP_PARENT:-}" ]]; then echo "$BUNLET_CGROUP_PARENT" >"$dir/cgroup-parent"; fi
  rm -f "$sock" "$sock.ttrpc"
  # setsid: containerd must not share the caller's session or process group,
  # so a test runner's signals do not reach it. Shims get their own groups
  # from containerd anyway.
  setsid "$CONTAINERD" --config "$dir/config.toml" </dev/null >>"$dir/containerd.log" 2>&1 &
  pid=$!
  echo "$pid" >"$pidfile"
  wait_ready "$pid"
  local first=0
  [[ -f "$dir/.imported" && "$(cat "$dir/.imported")" == "$(cat "$images_dir/stamp")" ]] || first=1
  if (( first )); then
    import_images
    cat "$images_dir/stamp" >"$dir/.imported"
  fi
  log "started ${RUNTIME:-containerd16} pid $pid on $sock (bridge $CNI_BRIDGE, subnet $CNI_SUBNET) in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}

# Stop containerd only. SIGTERM lets it close the bolt db cleanly; shims run
# in their own process groups and keep the containers alive.
do_stop() {
  local pid i
  if ! pid="$(running_pid)"; then
    log "not running ($dir)"
    rm -f "$pidfile"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    alive "$pid" || break
    sleep 0.05
  done
  if alive "$pid"; then
    log "containerd $pid ignored SIGTERM for 10s, killing"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.05; done
  fi
  rm -f "$pidfile" "$sock" "$sock.ttrpc"
  log "stopped containerd $pid ($dir)"
}

# Pids of shims started by this DIR's containerd: their argv has
# "-address DIR/containerd.sock" (exact argument match, not a pattern).
shim_pids() {
  local p
  for p in /proc/[0-9]*; do
    [[ "$(cat "$p/comm" 2>/dev/null)" == containerd-shim* ]] || continue
    if grep -qxF -- "$sock" <<<"$(tr '\0' '\n' <"$p/cmdline" 2>/dev/null)"; then # (no pipe: see wait_ready)
      echo "${p#/proc/}"
    fi
  done
}

do_purge() {
  [[ -d "$dir" ]] || { log "nothing to purge at $dir"; return 0; }
  rmdir "$dir" 2>/dev/null && { log "purged empty $dir"; return 0; }
  # Only ever purge something this script created.
  [[ -f "$dir/config.toml" || -f "$dir/network.env" || -f "$dir/runtime.env" ]] || die "$dir does not look like a containerd.sh directory; not purging"
  do_stop
  # 1. Containers. Each task's bundle is DIR/state/io.containerd.runtime.v2.task/NS/ID;
  # its options.json names the runc root: DIR/runc for CRI containers
  # (runtimes.runc.options.Root), empty for `ctr run` ones, which use runc's
  # shared default /run/containerd/runc (IDs there are unique per container,
  # so deleting exactly ours is safe).
  local bundle ns id root
  for bundle in "$dir"/state/io.containerd.runtime.v2.task/*/*/; do
    [[ -d "$bundle" ]] || continue
    bundle="${bundle%/}"; id="${bundle##*/}"; ns="${bundle%/*}"; ns="${ns##*/}"
    # A task stopped while it was being created may have no options.json yet (sed exits 2: not fatal here).
    root="$(sed -n 's/.*"root":"\([^"]*\)".*/\1/p' "$bundle/options.json" 2>/dev/null || true)"
    root="${root:-/run/containerd/runc}/$ns"
    if [[ -d "$root/$id" ]]; then
      "$RUNC" --root "$root" delete --force "$id" >/dev/null 2>&1 || log "runc delete --force $id failed"
    fi
  done
  # Whatever is still in the agent's cgroups (a container whose runc state
  # is gone, a process that escaped the shim) is killed there.
  if [[ -s "$dir/cgroup-parent" ]]; then
    kill_cgroup_procs "$(cat "$dir/cgroup-parent")"
  fi
  # 2. Shims (and their sockets under /run/containerd/s).
  local pids addr p i
  pids="$(shim_pids)"
  if [[ -n "$pids" ]]; then
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    for p in $pids; do
      for ((i = 0; i < 250; i++)); do alive "$p" || break; sleep 0.02; done
    done
    log "killed shims: $(echo $pids)"
  fi
  for addr in "$dir"/state/io.containerd.runtime.v2.task/*/*/address; do
    [[ -f "$addr" ]] || continue
    addr="$(cat "$addr")"
    addr="${addr#unix://}"
    [[ "$addr" == /run/containerd/s/* ]] && rm -f "$addr"
  done
  # 3. Network: iptables rules the bridge (ipMasq) and portmap plugins wrote
  # for this network (they carry its name in a comment), the bridge, and
  # libcni's result cache in /var/lib/cni.
  if [[ -f "$dir/network.env" ]]; then
    # shellcheck disable=SC1091
    source "$dir/network.env"
    purge_iptables "$CNI_NETWORK"
    # Only a bridge: BUNLET_CNI_BRIDGE could name any interface.
    if [[ -d "/sys/class/net/$CNI_BRIDGE/bridge" ]]; then
      ip link delete "$CNI_BRIDGE" && log "deleted bridge $CNI_BRIDGE"
    fi
    # libcni caches each ADD result in /var/lib/cni/results, for this
    # network and for containerd's built-in loopback network.
    local res cid
    for res in /var/lib/cni/results/"$CNI_NETWORK"-*; do
      [[ -f "$res" ]] || continue
      cid="${res#/var/lib/cni/results/"$CNI_NETWORK"-}"
      cid="${cid%-*}"
      rm -f "$res" /var/lib/cni/results/cni-loopback-"$cid"-lo
    done
  fi
  # 4. Mounts under DIR (rootfs overlays, shm, netns), deepest first.
  local m
  while read -r m; do
    umount -l "$m" 2>/dev/null || log "umount $m failed"
  done < <(awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  # 5. Cgroups the agent created under its cgroup parent, in every hierarchy.
  if [[ -s "$dir/cgroup-parent" ]]; then
    purge_cgroups "$(cat "$dir/cgroup-parent")"
  fi
  rm -rf "$dir"
  log "purged $dir"
}

purge_iptables() {
  local net="$1" table rules chains line c
  for table in nat filter; do
    rules="$(iptables-save -t "$table" 2>/dev/null | grep -F "name: \\\"$net\\\"" | grep '^-A ' || true)"
    [[ -n "$rules" ]] || continue
    chains="$(grep -o -- '-j CNI-[A-Za-z0-9-]*' <<<"$rules" | awk '{print $2}' | sort -u || true)"
    while IFS= read -r line; do
      # iptables-save quotes the comment; eval re-splits it into words.
      eval "iptables -w 5 -t $table ${line/#-A/-D}" 2>/dev/null || true
    done <<<"$rules"
    for c in $chains; do
      case "$c" in CNI-HOSTPORT-*|CNI-FORWARD|CNI-ADMIN) continue ;; esac # shared chains
      iptables -w 5 -t "$table" -F "$c" 2>/dev/null || true
      iptables -w 5 -t "$table" -X "$c" 2>/dev/null || true
    done
    log "removed $(wc -l <<<"$rules") $table rules of $net"
  done
}

# Cgroup dirs of PARENT in every mounted hierarchy (v1 controllers, unified).
cgroup_dirs() {
  local parent="/${1#/}" h
  [[ "$parent" != / && "$parent" != */.. && "$parent" != */../* ]] || return 0
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [[ -d "${h%/}$parent" ]] && echo "${h%/}$parent"
  done
  return 0
}

kill_cgroup_procs() {
  local d pids i own
  # Never the caller's own cgroup: the parent must be below it, not at or above.
  while IFS=: read -r _ _ own; do
    if [[ "$own/" == "/${1#/}/"* ]]; then
      log "cgroup parent $1 contains this process; not killing there"
      return 0
    fi
  done </proc/self/cgroup
  for ((i = 0; i < 50; i++)); do
    pids="$(for d in $(cgroup_dirs "$1"); do find "$d" -name cgroup.procs -exec cat {} +; done | sort -u)"
    [[ -n "$pids" ]] || return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.05
  done
  log "processes left in cgroup $1: $(echo $pids)"
}

purge_cgroups() {
  local d
  for d in $(cgroup_dirs "$1"); do
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [[ -d "$d" ]] && log "cgroup $d still has processes; left in place"
  done
  return 0
}

choose_runtime
case "$cmd" in
  start) do_start ;;
  stop) do_stop ;;
  restart) do_stop; do_start ;;
  purge) do_purge ;;
  *) usage ;;
esac
