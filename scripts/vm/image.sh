#!/usr/bin/env bash
# Builds (once, cached) the guest image for one Slurm release:
#   $VM_CACHE/<suite>/{rootfs.img,vmlinuz,initrd.img,stamp}
# A raw ext4 root filesystem made with `mmdebstrap --variant=minbase` from Debian's archive
# (trixie: Slurm 24.11, sid: Slurm 26.05), no systemd: /sbin/slurmwatch-vminit (guest-boot.sh)
# is PID 1 and runs the share's script. Rebuilt when an input changes: this script, the
# boot script, the package list or VERSION below (the stamp holds their hash).
#
#   scripts/vm/image.sh 24.11|26.05|trixie|sid
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/vm/common.sh

VERSION=1 # bump to force a rebuild (e.g. for a newer point release in the archive)
suite=$(suite_of "${1:?usage: $0 24.11|26.05}")
out=$VM_CACHE/$suite

# The accounting back end: slurmdbd 24.11/26.05 die at start against these suites' MariaDB
# 11.8 (`_check_mysql_concat_is_sane`, client error 5027), so the server (and client tools)
# come from bookworm's MariaDB 10.11, pinned above the suite's own. slurmdbd keeps the
# suite's libmariadb3.
PACKAGES=(
  kmod procps iproute2 mount util-linux linux-image-amd64 initramfs-tools
  munge slurmctld slurmd slurm-client slurmdbd
  mariadb-server-core mariadb-client-core
  python3 sqlite3
)
BOOKWORM_PINNED=(mariadb-server-core mariadb-client-core mariadb-common libaio1)

inputs_hash() {
  {
    echo "$VERSION $suite ${PACKAGES[*]} ${BOOKWORM_PINNED[*]}"
    cat scripts/vm/image.sh scripts/vm/guest-boot.sh scripts/vm/common.sh
  } | sha256sum | cut -d' ' -f1
}
want=$(inputs_hash)
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$want" ] &&
  [ -f "$out/rootfs.img" ] && [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.img" ]; then
  vlog "image $suite up to date ($out)"
  exit 0
fi
command -v mmdebstrap >/dev/null || vdie "mmdebstrap missing: run scripts/vm/deps.sh"
[ "$(id -u)" = 0 ] || vdie "run as root (mmdebstrap --mode=root, mkfs.ext4 -d)"

start=$SECONDS
mkdir -p "$out"
work=$(mktemp -d "$VM_CACHE/build-$suite.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

cat > "$work/pin" <<PIN
Package: *
Pin: release n=bookworm
Pin-Priority: 100

Package: ${BOOKWORM_PINNED[*]}
Pin: release n=bookworm
Pin-Priority: 1001
PIN

# initramfs: only what a virtio guest needs to mount its root (MODULES=list keeps it ~11 MB
# and fast to build); 9p for the share is loaded from the root filesystem later.
cat > "$work/initramfs-hook" <<'HOOK'
#!/bin/sh
[ "$1" = prereqs ] && exit 0
. /usr/share/initramfs-tools/hook-functions
for m in virtio_pci virtio_blk ext4 9pnet_virtio 9p; do force_load "$m"; done
HOOK

vlog "building $suite image (mmdebstrap) ..."
mmdebstrap --variant=minbase --mode=root --format=directory \
  --aptopt='APT::Install-Recommends "false"' \
  --aptopt='Acquire::Check-Valid-Until "false"' \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --setup-hook='mkdir -p "$1/etc/apt/preferences.d"' \
  --setup-hook="cp '$work/pin' \"\$1/etc/apt/preferences.d/slurmwatch-bookworm\"" \
  --essential-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" "$1/etc/initramfs-tools/hooks"' \
  --essential-hook='echo MODULES=list > "$1/etc/initramfs-tools/conf.d/slurmwatch-vm"' \
  --essential-hook="install -m 0755 '$work/initramfs-hook' \"\$1/etc/initramfs-tools/hooks/slurmwatch-vm\"" \
  --customize-hook="install -m 0755 scripts/vm/guest-boot.sh \"\$1/sbin/slurmwatch-vminit\"" \
  --customize-hook='chroot "$1" sh -ec "
    echo slurmvm > /etc/hostname
    printf \"127.0.0.1 localhost\n127.0.1.1 slurmvm\n\" > /etc/hosts
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile /etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    id mysql >/dev/null 2>&1 || useradd -r -M -d /var/lib/mysql -s /usr/sbin/nologin mysql
    mkdir -p /var/lib/mysql; chown mysql:mysql /var/lib/mysql
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql --auth-root-authentication-method=socket >/dev/null
    id swuser1 >/dev/null 2>&1 || useradd -m -s /bin/bash swuser1
    id swuser2 >/dev/null 2>&1 || useradd -m -s /bin/bash swuser2
    mkdir -p /share /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
    apt-get clean; rm -rf /var/lib/apt/lists/*
  "' \
  "$suite" "$root" \
  "deb [signed-by=$KEYRING] $MIRROR $suite main" \
  "deb [signed-by=$KEYRING] $MIRROR bookworm main" >&2

cp -L "$root"/boot/vmlinuz-* "$work/vmlinuz"
cp -L "$root"/boot/initrd.img-* "$work/initrd.img"
# Room for the guest's writes (snapshot=on keeps them out of the file): the tests write ~1 GiB.
size_mb=$(($(du -sm "$root" | cut -f1) + 3072))
rm -f "$work/rootfs.img"
mkfs.ext4 -q -F -L slurmvm -d "$root" "$work/rootfs.img" "${size_mb}M"
mv -f "$work/rootfs.img" "$work/vmlinuz" "$work/initrd.img" "$out/"
dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package} ${Version}\n' > "$out/packages.txt"
echo "$want" > "$out/stamp"
vlog "image $suite built in $((SECONDS - start)) s: $(du -sh --apparent-size "$out/rootfs.img" | cut -f1) ($(grep -E '^(slurmd|mariadb-server-core|linux-image-[0-9])' "$out/packages.txt" | tr '\n' ' '))"
