#!/usr/bin/env bash
# The post-mortem's latency against its floor, on the same finished job (issue 19): one bare
# `sacct -j JOB` (what any report must pay), `slurmwatch report JOB --json`, and reportseff
# 2.10.3 (PyPI) when pip can install it. Prints medians of N runs, the difference to sacct,
# and how many times each report ran sacct (a logging `sacct` wrapper first on PATH).
# Needs the test cluster (scripts/cluster.sh up) and a release build of the CLI.
# The report runs sacct with the CLI's TCP shim preloaded (target/release/libslurmwatch_quickack.so,
# core/src/slurm/quickack.rs): it is measured with and without (SLURMWATCH_QUICKACK=0), and a
# bare sacct under the same shim is shown beside it.
# QUICKACK=1 runs it all again with `quickack 1` on the route to slurmdbd (this host's
# loopback route, restored on exit): the figures without TCP's delayed-ACK stalls, which are
# most of every slurmdbd round trip here (docs/admin.md#overhead).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-21}
ours=${SLURMWATCH:-$PWD/target/release/slurmwatch}
[ -x "$ours" ] || cargo build -q --release -p slurmwatch-cli --bin slurmwatch
shim=$(dirname "$ours")/libslurmwatch_quickack.so
[ -f "$shim" ] || cargo build -q --release -p slurmwatch-quickack
venv=/tmp/slurmwatch-bench-venv
[ -x "$venv/bin/reportseff" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q reportseff==2.10.3; } || true

dir=$(mktemp -d /tmp/sw-bench-report.XXXX); chmod 1777 "$dir"
route=$(ip route show table local exact 127.0.0.1 | sed 's/ *quickack [01]//')
restore() { if [ "${QUICKACK:-0}" = 1 ]; then ip route change $route table local 2>/dev/null || true; fi; }
trap 'rm -rf "$dir"; restore' EXIT
printf '#!/bin/bash\npython3 -c "a = bytearray(100 << 20); import time; t = time.time()\nwhile time.time() - t < 2: pass"\n' > "$dir/job.sh"
id=$(cd "$dir" && sbatch --parsable --slurmwatch=1 --mem=500M -o /dev/null job.sh)
# shellcheck source=scripts/wait-until.sh
. scripts/wait-until.sh
done_() { sacct -j "$id" -X -n -o State | grep -q COMPLETED; }
wait_until 120 "job $id to complete" done_
sleep 2

# Counts sacct calls: a wrapper named sacct, first on PATH.
real_sacct=$(command -v sacct)
mkdir -p "$dir/bin"
printf '#!/bin/sh\necho x >> %s/calls\nexec %s "$@"\n' "$dir" "$real_sacct" > "$dir/bin/sacct"
chmod 755 "$dir/bin/sacct"
calls() { : > "$dir/calls"; PATH=$dir/bin:$PATH "$@" >/dev/null 2>&1 || true; wc -l < "$dir/calls"; }

median_ms() { # COMMAND...
  for _ in $(seq "$N"); do
    s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); echo $(( (e - s) / 1000000 ))
  done | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}
measure() { # TITLE
  sacct_ms=$(median_ms sacct -j "$id")
  # Any TRES field makes sacct fetch slurmdbd's TRES table (one more RPC): the floor of a report
  # that must read memory and GPUs from AllocTRES/TRESUsageInTot.
  tres_ms=$(median_ms sacct -j "$id" -o JobID,AllocTRES)
  shim_sacct_ms=$(median_ms env LD_PRELOAD="$shim" sacct -j "$id")
  shim_tres_ms=$(median_ms env LD_PRELOAD="$shim" sacct -j "$id" -o JobID,AllocTRES)
  ours_ms=$(median_ms "$ours" report "$id" --json)
  bare_ms=$(median_ms env SLURMWATCH_QUICKACK=0 "$ours" report "$id" --json)
  ours_calls=$(calls "$ours" report "$id" --json)
  printf 'report of finished job %s, median of %s runs (2-core host), %s:\n' "$id" "$N" "$1"
  printf '  %-36s %6s ms\n' "sacct -j $id (the floor)" "$sacct_ms"
  printf '  %-36s %6s ms\n' "sacct -j $id -o JobID,AllocTRES" "$tres_ms"
  printf '  %-36s %6s ms\n' "the same two under the TCP shim" "$shim_sacct_ms, $shim_tres_ms"
  printf '  %-36s %6s ms  (sacct %+d ms; %s sacct call(s))\n' "slurmwatch report --json" "$ours_ms" $((ours_ms - sacct_ms)) "$ours_calls"
  printf '  %-36s %6s ms  (sacct %+d ms)\n' "  the same, SLURMWATCH_QUICKACK=0" "$bare_ms" $((bare_ms - sacct_ms))
  if [ -x "$venv/bin/reportseff" ]; then
    rs_ms=$(median_ms "$venv/bin/reportseff" "$id")
    rs_calls=$(calls "$venv/bin/reportseff" "$id")
    printf '  %-36s %6s ms  (sacct %+d ms; %s sacct call(s))\n' "reportseff 2.10.3" "$rs_ms" $((rs_ms - sacct_ms)) "$rs_calls"
  else
    echo "  reportseff 2.10.3: not installed (pip could not fetch it); not compared"
  fi
}
measure "the route to slurmdbd as it is"
if [ "${QUICKACK:-0}" = 1 ]; then
  grep -q '^AccountingStorageHost=127.0.0.1' /etc/slurm/slurm.conf \
    || { echo "QUICKACK=1: only for a slurmdbd on this host's loopback"; exit 2; }
  # shellcheck disable=SC2086 # the route's words
  ip route change $route table local quickack 1
  measure "quickack 1 on the route to slurmdbd"
fi
