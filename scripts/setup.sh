#!/usr/bin/env bash
# Makes a fresh Debian 12 machine (as root) ready to build and test the
# agent, and does nothing that is already done:
#
#   1. Debian packages the real-runtime tests need, installed only when
#      missing (one `apt-get update` first, only then);
#   2. `npm ci` when node_modules is missing or older than package-lock.json;
#   3. the test images (scripts/images.sh, cached in .cache/images).
#
# Safe to run again and again; a warm run takes well under a second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
t0=$(date +%s%N)
say() { echo "setup: $*"; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# What each package is for:
#   containerd, runc, containernetworking-plugins  the runtime under test (CRI, /usr/lib/cni)
#   iptables, iproute2     bridge (ipMasq) and portmap plugins; purge deletes bridges
#   busybox-static         the busybox test image and its applets
#   gcc, libc6-dev         the static pause program of the pause image
#   protobuf-compiler      protoc for the generated CRI client
#   util-linux             flock and setsid used by the scripts (essential, normally present)
#   qemu-user-static, libc6-arm64-cross, binutils  the arm64 release binary run under qemu; readelf
#   dbus-daemon, systemd, python3-dbus, python3-gi  graceful shutdown through logind, tested on a
#                          private bus with a stand-in logind (systemd-inhibit and busctl are systemd's)
packages=(containerd runc containernetworking-plugins iptables iproute2 busybox-static gcc libc6-dev protobuf-compiler util-linux qemu-user-static libc6-arm64-cross binutils dbus-daemon systemd python3-dbus python3-gi qemu-system-x86 linux-image-cloud-amd64)
# Node's npm is only needed to run `npm ci` (Bun itself comes from the npm registry).
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  [[ $(id -u) -eq 0 ]] || { say "missing packages (${missing[*]}) and not root: run as root"; exit 1; }
  t=$(date +%s%N)
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
  say "packages installed in $(ms "$t") ms"
else
  say "packages: all present"
fi

# npm writes node_modules/.package-lock.json at the end of every install: it
# missing or older than the lockfile means node_modules does not match.
cd "$repo"
if [[ -f package-lock.json ]]; then
  if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
    t=$(date +%s%N)
    say "npm ci (node_modules missing or stale)"
    npm ci --no-audit --no-fund
    say "npm ci done in $(ms "$t") ms"
  else
    say "node_modules: up to date"
  fi
fi

t=$(date +%s%N)
"$here/images.sh"
say "images ready in $(ms "$t") ms"

grep -qw overlay /proc/filesystems || say "warning: no overlay filesystem in this kernel; containerd's overlayfs snapshotter will fail"
say "done in $(ms "$t0") ms"
