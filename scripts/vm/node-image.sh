#!/usr/bin/env bash
# Builds the root file system of the systemd test node: Debian 12 from the
# host's apt sources (mmdebstrap), systemd as PID 1 (cgroup v2 only, the
# default of Debian 12's systemd), dbus, systemd-logind, containerd 1.6
# configured with `SystemdCgroup = true`, runc, the CNI plugins and Debian's
# cloud kernel with its initramfs. Nothing of the agent is in it: the agent,
# the images and the checks come per run on a second disk (run-node.ts), so
# the image is rebuilt only when this script or the apt sources change.
#
#   scripts/vm/node-image.sh            build if missing, print the image dir
#
# Output (cached, keyed by a hash of this script, node-check.service and the apt sources):
#   $BUNLET_VM_CACHE/node-<hash>/{root.img,vmlinuz,initrd.img}
#   (BUNLET_VM_CACHE defaults to /var/cache/bunlet/vm)
# Idempotent: an existing complete image is reused; a build goes to a
# temporary directory and is renamed into place only when complete, so an
# interrupted build leaves nothing that looks complete.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${BUNLET_VM_CACHE:-/var/cache/bunlet/vm}"
sources="${BUNLET_VM_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}"
[[ -f "$sources" ]] || sources=/etc/apt/sources.list

# What the node has, and why:
#   systemd systemd-sysv dbus libpam-systemd   PID 1, the system bus, logind (shutdown inhibitors)
#   containerd runc containernetworking-plugins the runtime (1.6) and CNI (/usr/lib/cni)
#   linux-image-cloud-amd64 initramfs-tools     the kernel booted by qemu, with its modules
#   iptables iproute2 kmod udev                 CNI bridge/portmap, modules, device nodes
#   curl jq procps util-linux                   the checks: the agent's HTTP port, JSON, ps
packages=systemd,systemd-sysv,dbus,libpam-systemd,containerd,runc,containernetworking-plugins,linux-image-cloud-amd64,initramfs-tools,iptables,iproute2,kmod,udev,curl,jq,procps,util-linux,e2fsprogs

key="$({ sha256sum "${BASH_SOURCE[0]}" "$here/node-check.service" | cut -d' ' -f1; sha256sum "$sources" | cut -d' ' -f1; echo "$packages"; } | sha256sum | cut -c1-16)"
out="$cache/node-$key"
if [[ -s "$out/root.img" && -s "$out/vmlinuz" && -s "$out/initrd.img" ]]; then
  echo "$out"
  exit 0
fi

for tool in mmdebstrap mkfs.ext4; do
  command -v "$tool" >/dev/null || { echo "node-image.sh: $tool missing (Debian packages mmdebstrap, e2fsprogs; scripts/setup.sh installs them)" >&2; exit 1; }
done
mkdir -p "$cache"
tmp="$(mktemp -d "$cache/.build-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s)
echo "node-image.sh: building $out" >&2

# The customize hooks run with the root directory as $1, after every package is installed.
mmdebstrap --variant=minbase --include="$packages" \
  --customize-hook='echo bunlet-node >"$1/etc/hostname"; printf "127.0.0.1 localhost\n127.0.1.1 bunlet-node\n" >"$1/etc/hosts"' \
  --customize-hook='printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\n/dev/vdb /payload ext4 rw,nofail,x-systemd.device-timeout=300s 0 2\n" >"$1/etc/fstab"; mkdir -p "$1/payload"' \
  --customize-hook='mkdir -p "$1/etc/systemd/network"; printf "[Match]\nName=en* eth*\n\n[Network]\nDHCP=yes\n" >"$1/etc/systemd/network/10-dhcp.network"; chroot "$1" systemctl enable systemd-networkd' \
  --customize-hook='chroot "$1" containerd config default >"$1/etc/containerd/config.toml"' \
  --customize-hook='sed -i -e "s/SystemdCgroup = false/SystemdCgroup = true/" -e "s#sandbox_image = .*#sandbox_image = \"localhost/bunlet/pause:1.0\"#" -e "s#bin_dir = .*#bin_dir = \"/usr/lib/cni\"#" "$1/etc/containerd/config.toml"' \
  --customize-hook='grep -q "SystemdCgroup = true" "$1/etc/containerd/config.toml"' \
  --customize-hook='mkdir -p "$1/etc/cni/net.d"; printf "%s\n" "{\"cniVersion\":\"0.4.0\",\"name\":\"bunlet\",\"plugins\":[{\"type\":\"bridge\",\"bridge\":\"cni0\",\"isGateway\":true,\"ipMasq\":true,\"ipam\":{\"type\":\"host-local\",\"ranges\":[[{\"subnet\":\"10.88.0.0/16\"}]],\"routes\":[{\"dst\":\"0.0.0.0/0\"}]}},{\"type\":\"portmap\",\"capabilities\":{\"portMappings\":true}}]}" >"$1/etc/cni/net.d/10-bunlet.conflist"' \
  --customize-hook='mkdir -p "$1/etc/systemd/journald.conf.d"; printf "[Journal]\nStorage=persistent\n" >"$1/etc/systemd/journald.conf.d/bunlet.conf"' \
  --customize-hook='cp "'"$here"'/node-check.service" "$1/etc/systemd/system/bunlet-node-check.service"; chroot "$1" systemctl enable bunlet-node-check.service' \
  --customize-hook='chroot "$1" systemctl mask getty@tty1.service serial-getty@ttyS0.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer' \
  --customize-hook='cp "$1"/boot/vmlinuz-* "'"$tmp"'/vmlinuz"; cp "$1"/boot/initrd.img-* "'"$tmp"'/initrd.img"' \
  bookworm "$tmp/root" "$sources" >&2

# An ext4 image made from the directory (no loop device needed); qemu boots it
# through a copy-on-write overlay, so this file stays as built.
mkfs.ext4 -q -F -L root -d "$tmp/root" "$tmp/root.img" 4G >&2
rm -rf "$tmp/root"
mv "$tmp" "$out"
trap - EXIT
# Images of older inputs are dead weight (4 GiB sparse each): only the current one stays.
find "$cache" -mindepth 1 -maxdepth 1 -name 'node-*' ! -name "node-$key" -exec rm -rf {} +
echo "node-image.sh: built in $(( $(date +%s) - t0 )) s" >&2
echo "$out"
