#!/usr/bin/env bash
# Makes a fresh Debian 12 machine (as root) ready to build and test the
# agent, or only to run the demo, and does nothing that is already done:
#
#   1. Debian packages, installed only when missing (one `apt-get update`
#      first, only then): the demo's set, or the tests' (a superset);
#   2. `npm ci` when node_modules is missing or older than package-lock.json;
#   3. the test images (scripts/images.sh, cached in .cache/images);
#   4. tests only: Go for the control plane build (scripts/go.sh: the one
#      found, or the pinned release installed into the cache) and the kernel
#      the cgroup v2 VM test boots, unpacked from Debian's package into the
#      cache, never installed as a kernel of this machine; the per-user
#      inotify instance limit raised to 1024 when it is lower.
#
#   scripts/setup.sh                        what scripts/test.sh needs
#   scripts/setup.sh --demo                 only what scripts/demo.sh uses
#   scripts/setup.sh --print-packages [--demo]
#                                           the Debian packages of that selection, one
#                                           per line; installs nothing
#
# Safe to run again and again; a warm run takes well under a second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
t0=$(date +%s%N)
say() { echo "setup: $*"; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

demo=0
print=0
for a in "$@"; do
  case "$a" in
    --demo) demo=1 ;;
    --print-packages) print=1 ;;
    *) echo "usage: $0 [--demo] [--print-packages]" >&2; exit 2 ;;
  esac
done

# What each package is for. The demo (scripts/demo.sh: build, a private
# containerd, the agent, one static pod, curl):
#   containerd, runc, containernetworking-plugins  the runtime (CRI, /usr/lib/cni)
#   iptables, iproute2     bridge (ipMasq) and portmap plugins; purge deletes bridges
#   busybox-static         the busybox test image and its applets
#   gcc, libc6-dev         the static pause program of the pause image
#   util-linux             flock and setsid used by the scripts (essential, normally present)
#   curl                   the demo asks the pod and the read-only port
demo_packages=(containerd runc containernetworking-plugins iptables iproute2 busybox-static gcc libc6-dev util-linux curl)
# The tests add:
#   protobuf-compiler      protoc for the generated CRI client
#   unzip                  scripts/go.sh unpacks the Go toolchain (when this machine has no Go 1.25+)
#   libseccomp-dev, pkg-config  runc built from Go modules for containerd 2.x (scripts/containerd2/build.sh)
#   qemu-user-static, libc6-arm64-cross, binutils  the arm64 release binary run under qemu; readelf
#   mmdebstrap, qemu-utils, e2fsprogs  the systemd node VM (scripts/vm/node-image.sh, run-node.ts):
#                          a Debian root file system, its qcow2 overlay, ext4 images made from directories
#   dbus-daemon, systemd, python3-dbus, python3-gi  graceful shutdown through logind, tested on a
#                          private bus with a stand-in logind (systemd-inhibit and busctl are systemd's)
#   qemu-system-x86        the cgroup v2 VM test (its kernel is unpacked below, not installed)
#   prometheus             a real Prometheus scraping /metrics/cadvisor (test/integration/prometheus.test.ts);
#                          the test runs its binary itself, the package's service is not used
test_packages=("${demo_packages[@]}" protobuf-compiler unzip libseccomp-dev pkg-config qemu-user-static libc6-arm64-cross binutils dbus-daemon systemd python3-dbus python3-gi qemu-system-x86 prometheus mmdebstrap qemu-utils e2fsprogs)
if ((demo)); then packages=("${demo_packages[@]}"); else packages=("${test_packages[@]}"); fi
# Node's npm is only needed to run `npm ci` (Bun itself comes from the npm registry).
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
if ((print)); then printf '%s\n' "${packages[@]}"; exit 0; fi

# The kernel the cgroup v2 VM test boots (scripts/vm/run.ts): Debian's cloud
# kernel, the package linux-image-cloud-amd64 depends on, downloaded and its
# vmlinuz unpacked into $BUNLET_CACHE/vm-kernel. Installing the package instead
# would regenerate an initramfs, move /vmlinuz and, on a host booting with
# grub, possibly make it the default kernel. Kept until the directory is removed.
vm_kernel() {
  local dir="${BUNLET_CACHE:-/var/cache/bunlet}/vm-kernel" pkg tmp t
  if compgen -G "$dir/vmlinuz-*-cloud-amd64" >/dev/null; then say "vm kernel: $(cd "$dir" && ls vmlinuz-*-cloud-amd64 | sort -V | tail -n 1)"; return 0; fi
  [[ "$(dpkg --print-architecture)" == amd64 ]] || { say "vm kernel: none for $(dpkg --print-architecture) (the cgroup v2 VM test boots an amd64 kernel)"; return 0; }
  t=$(date +%s%N)
  kernel_package() { apt-cache depends --important linux-image-cloud-amd64 2>/dev/null | awk '$1=="Depends:" {print $2; exit}'; }
  pkg="$(kernel_package)"
  if [[ -z "$pkg" ]] && ((!apt_updated)); then apt-get update -q; apt_updated=1; pkg="$(kernel_package)"; fi
  [[ -n "$pkg" ]] || { say "vm kernel: apt knows no linux-image-cloud-amd64"; exit 1; }
  mkdir -p "$dir"
  tmp="$(mktemp -d "$dir/.tmp.XXXXXX")"
  # apt-get download as root says it works unsandboxed: the directory is root's; that is fine here.
  (cd "$tmp" && apt-get download -q "$pkg" 2>&1 | grep -v "unsandboxed as root" >&2 || true)
  compgen -G "$tmp/*.deb" >/dev/null || { rm -rf "$tmp"; say "vm kernel: apt-get download $pkg failed"; exit 1; }
  dpkg-deb --fsys-tarfile "$tmp"/*.deb | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
  mv "$tmp"/boot/vmlinuz-* "$dir/"
  rm -rf "$tmp"
  say "vm kernel: $(cd "$dir" && ls vmlinuz-*-cloud-amd64 | sort -V | tail -n 1) unpacked from $pkg in $(ms "$t") ms"
}

apt_updated=0
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
  apt_updated=1
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

if ((!demo)); then
  t=$(date +%s%N)
  go="$(bash "$here/go.sh" | tail -n 1)"
  say "go: $go ($(GOTOOLCHAIN=local "$go" env GOVERSION)) in $(ms "$t") ms"
  vm_kernel
  # Every inotify instance of every root process counts against one per-user limit, Debian's default 128: the
  # suite runs containerd, a control plane, Prometheus and the upstream kubelet (cAdvisor and its file watchers
  # take a dozen) side by side, and the upstream kubelet failed to start ("too many open files") once it ran out.
  inotify=/proc/sys/fs/inotify/max_user_instances
  if [[ -w $inotify ]] && (($(cat "$inotify") < 1024)); then
    echo 1024 >"$inotify"
    say "inotify: max_user_instances raised to 1024 (was Debian's default; the suite runs many watchers side by side)"
  fi
fi

grep -qw overlay /proc/filesystems || say "warning: no overlay filesystem in this kernel; containerd's overlayfs snapshotter will fail"
say "done in $(ms "$t0") ms"
