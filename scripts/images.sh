#!/usr/bin/env bash
# Builds the two test images OFFLINE, as OCI image-layout tarballs that
# `ctr -n k8s.io images import FILE` accepts (no registry is reachable here):
#
#   localhost/bunlet/pause:1.0    -> OUT/pause.tar    (sandbox_image)
#   localhost/bunlet/busybox:1.0  -> OUT/busybox.tar  (workloads)
#
# Usage: scripts/images.sh [OUTDIR]        (default: <repo>/.cache/images)
#        scripts/images.sh --names         (print the two image names)
#        scripts/images.sh --oci NAME ROOTFS_DIR CONFIG_FRAGMENT OUTFILE
#                                          (one image from a directory, same layout)
#
# Layout of each tarball: oci-layout, index.json (annotated with
# io.containerd.image.name and org.opencontainers.image.ref.name),
# blobs/sha256/{layer,config,manifest}; one uncompressed layer.
#
# Cached: OUT/stamp holds a hash of every input (this script, the busybox
# binary, the compiler version, the architecture); when it matches, nothing
# is rebuilt. Deterministic: fixed mtimes, sorted entries, numeric owners, so
# the same inputs give the same digests.
#
# The pause program: a static C binary (gcc -static -Os), the same behaviour
# as upstream's build/pause/linux/pause.c: PID 1 that sleeps forever, exits 0
# on SIGTERM/SIGINT (a PID 1 without handlers would ignore them) and reaps
# the zombies of processes that get reparented to it (shared PID namespace).
# It is ~700 KB and needs nothing else in the image. Fallback when gcc is
# missing: busybox in the pause image running an `sh` loop with `trap`;
# it works but is bigger and reaps only through ash's job wait.
set -euo pipefail

PAUSE_IMAGE="localhost/bunlet/pause:1.0"
BUSYBOX_IMAGE="localhost/bunlet/busybox:1.0"
if [[ "${1:-}" == "--names" ]]; then
  echo "$PAUSE_IMAGE"
  echo "$BUSYBOX_IMAGE"
  exit 0
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
out="${1:-$repo/.cache/images}"
busybox_bin="${BUSYBOX_BIN:-/bin/busybox}"
export LC_ALL=C
# Fixed timestamp for every file, tar entry and the image config.
epoch=0
created="1970-01-01T00:00:00Z"

log() { echo "images: $*" >&2; }

case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) arch="$(uname -m)" ;;
esac

# tar with everything that makes it reproducible.
dtar() { tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=gnu "$@"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# oci_image NAME ROOTFS_DIR CONFIG_FRAGMENT OUTFILE
# CONFIG_FRAGMENT is the JSON inside "config": {...} (Env, Cmd, Entrypoint).
oci_image() {
  local name="$1" rootfs="$2" cfg="$3" outfile="$4"
  local lay="$work/layout-$(basename "$outfile" .tar)"
  mkdir -p "$lay/blobs/sha256"
  find "$rootfs" -exec touch -h -d "@$epoch" {} +
  (cd "$rootfs" && dtar -cf "$lay/layer.tar" $(ls -A))
  local ldig lsize
  ldig="$(sha "$lay/layer.tar")"; lsize="$(size "$lay/layer.tar")"
  mv "$lay/layer.tar" "$lay/blobs/sha256/$ldig"

  printf '{"created":"%s","architecture":"%s","os":"linux","config":{%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"bunlet scripts/images.sh"}]}' \
    "$created" "$arch" "$cfg" "$ldig" "$created" >"$lay/config.json"
  local cdig csize
  cdig="$(sha "$lay/config.json")"; csize="$(size "$lay/config.json")"
  mv "$lay/config.json" "$lay/blobs/sha256/$cdig"

  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$cdig" "$csize" "$ldig" "$lsize" >"$lay/manifest.json"
  local mdig msize
  mdig="$(sha "$lay/manifest.json")"; msize="$(size "$lay/manifest.json")"
  mv "$lay/manifest.json" "$lay/blobs/sha256/$mdig"

  printf '{"imageLayoutVersion":"1.0.0"}' >"$lay/oci-layout"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$mdig" "$msize" "$arch" "$name" "${name##*:}" >"$lay/index.json"

  find "$lay" -exec touch -h -d "@$epoch" {} +
  (cd "$lay" && dtar -cf "$outfile.tmp" oci-layout index.json blobs)
  mv -f "$outfile.tmp" "$outfile"
  log "built $name -> $outfile (manifest sha256:$mdig)"
}

# One more image from a directory, for other image sets (scripts/conformance/images.sh):
#   scripts/images.sh --oci NAME ROOTFS_DIR CONFIG_FRAGMENT OUTFILE
if [[ "${1:-}" == "--oci" ]]; then
  [[ $# -eq 5 ]] || { log "usage: $0 --oci NAME ROOTFS_DIR CONFIG_FRAGMENT OUTFILE"; exit 2; }
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  oci_image "$2" "$3" "$4" "$5"
  exit 0
fi

[[ -x "$busybox_bin" ]] || { log "missing $busybox_bin (apt-get install busybox-static)"; exit 1; }
if command -v gcc >/dev/null 2>&1; then cc_version="$(gcc --version | head -1)"; else cc_version="none"; fi

mkdir -p "$out"
# Two concurrent runs (parallel test files, setup.sh) must not interleave.
exec 9>"$out/.lock"
flock 9

stamp="$(
  {
    sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1
    sha256sum "$busybox_bin" | cut -d' ' -f1
    echo "$cc_version" "$arch"
  } | sha256sum | cut -d' ' -f1
)"
if [[ -f "$out/stamp" && "$(cat "$out/stamp")" == "$stamp" && -s "$out/pause.tar" && -s "$out/busybox.tar" ]]; then
  log "up to date in $out"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# ---- pause ------------------------------------------------------------------
pause_root="$work/pause-root"
mkdir -p "$pause_root"
if [[ "$cc_version" != none ]]; then
  cat >"$work/pause.c" <<'EOF'
/* bunlet pause: PID 1 of every pod sandbox. Mirrors upstream
 * kubernetes/build/pause/linux/pause.c: sleep forever, exit 0 on
 * SIGINT/SIGTERM, reap zombies on SIGCHLD. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void sigdown(int signo) { (void)signo; _exit(0); }

static void sigreap(int signo) {
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    static const char v[] = "bunlet-pause 1.0\n";
    return write(1, v, sizeof v - 1) < 0;
  }
  struct sigaction down = {.sa_handler = sigdown};
  sigemptyset(&down.sa_mask);
  if (sigaction(SIGINT, &down, NULL) < 0 || sigaction(SIGTERM, &down, NULL) < 0) return 1;
  struct sigaction reap = {.sa_handler = sigreap, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
  sigemptyset(&reap.sa_mask);
  if (sigaction(SIGCHLD, &reap, NULL) < 0) return 2;
  for (;;) pause();
  return 42;
}
EOF
  gcc -static -Os -s -Wall -Werror -o "$pause_root/pause" "$work/pause.c"
  chmod 0755 "$pause_root/pause"
  pause_cfg='"Env":["PATH=/"],"Entrypoint":["/pause"]'
else
  log "gcc not found: pause image falls back to busybox sh + trap"
  mkdir -p "$pause_root/bin"
  cp "$busybox_bin" "$pause_root/bin/busybox"
  ln -s busybox "$pause_root/bin/sh"
  ln -s busybox "$pause_root/bin/sleep"
  printf '#!/bin/sh\ntrap "exit 0" TERM INT\nwhile :; do sleep 3600 & wait; done\n' >"$pause_root/pause"
  chmod 0755 "$pause_root/pause"
  pause_cfg='"Env":["PATH=/bin"],"Entrypoint":["/pause"]'
fi
oci_image "$PAUSE_IMAGE" "$pause_root" "$pause_cfg" "$out/pause.tar"

# ---- busybox ----------------------------------------------------------------
bb_root="$work/busybox-root"
mkdir -p "$bb_root"/{bin,sbin,usr/bin,usr/sbin,etc,root,home,tmp,var/www,var/tmp,proc,sys,dev,run}
chmod 0755 "$bb_root"/{bin,sbin,usr,usr/bin,usr/sbin,etc,home,var,var/www,proc,sys,dev,run}
chmod 0700 "$bb_root/root"
chmod 1777 "$bb_root/tmp" "$bb_root/var/tmp"
install -m 0755 "$busybox_bin" "$bb_root/bin/busybox"
# Every applet as a symlink (sh, sleep, httpd, cat, echo, ls, wget, nc, ...).
"$busybox_bin" --list-full | while read -r applet; do
  case "$applet" in */*) ;; *) continue ;; esac # skips "linuxrc"
  [[ "$applet" == bin/busybox ]] && continue
  mkdir -p "$bb_root/$(dirname "$applet")"
  ln -sfn /bin/busybox "$bb_root/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$bb_root/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' >"$bb_root/etc/group"
printf 'hello from bunlet busybox\n' >"$bb_root/var/www/index.html"
chmod 0644 "$bb_root/etc/passwd" "$bb_root/etc/group" "$bb_root/var/www/index.html"
oci_image "$BUSYBOX_IMAGE" "$bb_root" \
  '"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["sh"]' \
  "$out/busybox.tar"

echo "$stamp" >"$out/stamp"
