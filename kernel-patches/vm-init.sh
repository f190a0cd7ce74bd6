#!/bin/sh
# PID 1 of a hostwire guest: the host's root is mounted read-only over 9p, so the guest runs
# the host's own programs and the project as built. Mounts what a run needs, runs the command
# the host left in the shared directory (hostwire.share= on the kernel command line), records
# the boot id and time, and powers off. Nothing here may hang: the host kills a guest that does.
# PID 1 must not just exit (the kernel would panic): a step that fails ends the script through
# the EXIT trap, which prints one console line naming the step and powers the guest off.
set -eu
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH HOME=/tmp PYTHONDONTWRITEBYTECODE=1 LANG=C.UTF-8
step="start"
finished=no

power_off() {
    sync
    # LINUX_REBOOT_CMD_POWER_OFF; if that fails, PID 1 exits, the kernel panics (panic=-1
    # reboots) and QEMU, started with -no-reboot, ends.
    python3 -c 'import ctypes; ctypes.CDLL(None).reboot(0x4321FEDC)'
}

on_exit() {
    status=$?
    trap - EXIT
    if [ "$finished" != yes ]; then
        echo "hostwire vm-init: failed to $step (exit status $status); powering off" > /dev/console 2>&1 \
            || echo "hostwire vm-init: failed to $step (exit status $status); powering off"
    fi
    power_off
    exit 1
}
trap on_exit EXIT

step="mount /proc"; mount -t proc proc /proc
step="mount /sys"; mount -t sysfs sysfs /sys
# the kernel mounts devtmpfs itself (CONFIG_DEVTMPFS_MOUNT) where it can: then this one fails
mount -t devtmpfs devtmpfs /dev 2>/dev/null || true
step="make /dev/pts and /dev/shm"; mkdir -p /dev/pts /dev/shm
step="mount /dev/pts"; mount -t devpts devpts /dev/pts
step="mount /dev/shm"; mount -t tmpfs tmpfs /dev/shm
step="mount /tmp"; mount -t tmpfs tmpfs /tmp
step="mount /run"; mount -t tmpfs tmpfs /run
step="mount tracefs"; mount -t tracefs tracefs /sys/kernel/tracing
step="mount cgroup2"; mount -t cgroup2 cgroup2 /sys/fs/cgroup
step="bring up lo"; ip link set lo up
step="find hostwire.share= on the kernel command line"
share=$(sed -n 's/.*hostwire\.share=\([^ ]*\).*/\1/p' /proc/cmdline)
[ -n "$share" ]
# a host directory under /tmp or /run lies beneath the guest's own tmpfs: make its mount point
step="make the shared directory's mount point $share"; mkdir -p "$share"
step="mount the shared directory $share over 9p"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 hwshare "$share"
i=0
for dir in $(sed -n 's/.*hostwire\.rw=\([^ ]*\).*/\1/p' /proc/cmdline | tr ',' ' '); do
    step="mount the writable directory $dir over 9p"
    mkdir -p "$dir"
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 "hwrw$i" "$dir"
    i=$((i + 1))
done
step="record the boot in $share"
cat /proc/sys/kernel/random/boot_id > "$share/boot_id"
cut -d' ' -f1 /proc/uptime > "$share/boot_uptime_s"
uname -r > "$share/kernel_release"
step="run the guest command"
cd "$share"
# the command's own failure is its exit status, not a failure of the guest
rc=0
sh ./guest-command > guest.log 2>&1 || rc=$?
echo "$rc" > "$share/guest.rc"
finished=yes
