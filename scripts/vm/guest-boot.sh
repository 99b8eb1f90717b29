#!/bin/sh
# PID 1 of the slurmwatch test guests (installed as /sbin/slurmwatch-vminit by image.sh; the
# guest's /bin/sh is dash). No systemd: mount what Slurm needs, the cgroup v2 hierarchy and the
# 9p share, run the share's run.sh, power off. Whatever happens, the machine powers off.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=0755 tmpfs /run
mount -o remount,rw /
mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo "+cpuset +cpu +io +memory +pids" > /sys/fs/cgroup/cgroup.subtree_control
hostname slurmvm 2>/dev/null || echo slurmvm > /proc/sys/kernel/hostname
ip link set lo up
ip addr add 127.0.1.1/8 dev lo 2>/dev/null
modprobe 9pnet_virtio
modprobe 9p
mkdir -p /share
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576 share /share; then
  echo "slurmwatch-vminit: share mounted, running /share/run.sh"
  if [ -f /share/run.sh ]; then
    bash /share/run.sh
    echo "slurmwatch-vminit: run.sh exited $?"
  else
    echo "slurmwatch-vminit: no /share/run.sh"
  fi
else
  echo "slurmwatch-vminit: cannot mount the 9p share"
fi
sync
umount /share 2>/dev/null
echo "slurmwatch-vminit: power off"
echo o > /proc/sysrq-trigger
sleep 30
