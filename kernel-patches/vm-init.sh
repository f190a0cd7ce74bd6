#!/bin/sh
# PID 1 of a hostwire guest: the host's root is mounted read-only over 9p, so the guest runs
# the host's own programs and the project as built. Mounts what a run needs, runs the command
# the host left in the shared directory (hostwire.share= on the kernel command line), records
# the boot id and time, and powers off. Nothing here may hang: the host kills a guest that does.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH HOME=/tmp PYTHONDONTWRITEBYTECODE=1 LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t tracefs tracefs /sys/kernel/tracing
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
share=$(sed -n 's/.*hostwire\.share=\([^ ]*\).*/\1/p' /proc/cmdline)
# a host directory under /tmp or /run lies beneath the guest's own tmpfs: make its mount point
mkdir -p "$share" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 hwshare "$share"
i=0
for dir in $(sed -n 's/.*hostwire\.rw=\([^ ]*\).*/\1/p' /proc/cmdline | tr ',' ' '); do
    mkdir -p "$dir" 2>/dev/null
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 "hwrw$i" "$dir"
    i=$((i + 1))
done
cat /proc/sys/kernel/random/boot_id > "$share/boot_id"
cut -d' ' -f1 /proc/uptime > "$share/boot_uptime_s"
uname -r > "$share/kernel_release"
cd "$share" && sh ./guest-command > guest.log 2>&1
echo $? > "$share/guest.rc"
sync
# LINUX_REBOOT_CMD_POWER_OFF; if that fails, PID 1 exits, the kernel panics (panic=-1 reboots)
# and QEMU, started with -no-reboot, ends.
python3 -c 'import ctypes; ctypes.CDLL(None).reboot(0x4321FEDC)'
exit 1
