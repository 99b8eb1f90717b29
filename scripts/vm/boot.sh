#!/usr/bin/env bash
# Boots one suite's image once with SHARE as the 9p share (the guest runs SHARE/run.sh and
# powers off) and waits for it. TCG only (docs/design.md §9: /dev/kvm here is a PVM device that
# cannot run a stock kernel); snapshot=on, so every boot starts from the clean image.
# About 1 boot in 7 oopses early under multi-threaded TCG: an early "Kernel panic"/"Oops",
# or no sign of the share's script within BOOT_TIMEOUT seconds, boots again (3 tries).
#
#   scripts/vm/boot.sh SUITE SHARE [TOTAL_TIMEOUT_S]
# Exit 0 when the guest ran run.sh to the end (SHARE/out/stages.txt says tests_done).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/vm/common.sh
suite=$(suite_of "${1:?usage: $0 SUITE SHARE [TIMEOUT_S]}")
share=$(realpath "${2:?share directory}")
total=${3:-1200}
img=$VM_CACHE/$suite
BOOT_TIMEOUT=${BOOT_TIMEOUT:-150}
[ -f "$img/rootfs.img" ] || vdie "no image for $suite: run scripts/vm/image.sh $suite"
command -v qemu-system-x86_64 >/dev/null || vdie "qemu-system-x86_64 missing: run scripts/vm/deps.sh"

qpid=
cleanup() { [ -n "$qpid" ] && kill "$qpid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

for try in 1 2 3; do
  rm -rf "$share/out"
  mkdir -p "$share/out"
  console=$share/console-$try.log
  t0=$SECONDS
  qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m "${VM_MEM:-4G}" -smp 2 \
    -nographic -no-reboot -nic none -monitor none -serial "file:$console" \
    -kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 panic=-1 init=/sbin/slurmwatch-vminit" \
    -drive "file=$img/rootfs.img,format=raw,if=virtio,snapshot=on" \
    -virtfs "local,path=$share,mount_tag=share,security_model=none,id=share" \
    </dev/null >"$share/qemu-$try.log" 2>&1 &
  qpid=$!
  verdict=
  while kill -0 "$qpid" 2>/dev/null; do
    el=$((SECONDS - t0))
    if ! grep -q "share mounted" "$console" 2>/dev/null; then
      if grep -Eq "Kernel panic|Oops:|BUG: " "$console" 2>/dev/null; then verdict=oops; break; fi
      if ((el > BOOT_TIMEOUT)); then verdict=stuck; break; fi
    fi
    if ((el > total)); then verdict=timeout; break; fi
    sleep 1
  done
  if [ -n "$verdict" ]; then
    kill "$qpid" 2>/dev/null || true
    wait "$qpid" 2>/dev/null || true
    qpid=
    vlog "$suite boot $try: $verdict after $((SECONDS - t0)) s (console: $console)"
    [ "$verdict" = timeout ] && exit 1
    continue
  fi
  wait "$qpid" || true
  qpid=
  if grep -q "^stage tests_done" "$share/out/stages.txt" 2>/dev/null; then
    vlog "$suite: guest ran in $((SECONDS - t0)) s (boot $try)"
    exit 0
  fi
  if grep -q "share mounted" "$console" && ! grep -Eq "Kernel panic|Oops:" "$console"; then
    vlog "$suite: guest powered off before its tests were done (console: $console)"
    exit 1
  fi
  vlog "$suite boot $try: died early after $((SECONDS - t0)) s; booting again"
done
vdie "$suite: no good boot in 3 tries"
