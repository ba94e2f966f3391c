#!/bin/busybox sh
# PID 1 of the test VM (scripts/vm/initramfs.ts puts it at /init): mount the
# kernel filesystems the probe needs, run the probe, power off. The probe
# mounts cgroup2 itself. Whatever happens, the VM ends: poweroff, else a
# reboot (qemu runs with -no-reboot, so that exits too).
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
/bin/busybox mount -t tmpfs tmpfs /tmp
export PATH=/bin HOME=/root TMPDIR=/tmp
/probe
echo "BUNLET-PROBE-EXIT $?"
/bin/busybox poweroff -f
/bin/busybox reboot -f
