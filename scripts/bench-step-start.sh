#!/usr/bin/env bash
# Step start latency added by the plugin: wall time of `srun true` inside one allocation,
# median of 20, with no plugin loaded, with the plugin loaded but not asked, and recording.
# Needs the test cluster (scripts/cluster.sh up); restores plugstack.conf afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20}
conf=/etc/slurm/plugstack.conf
saved=$(cat "$conf")
trap 'printf "%s\n" "$saved" > "$conf"' EXIT

median_ms() { # ARGS for srun
  # Bounded: the allocation within 120 s, the steps within the 10-min limit.
  salloc -Q -n1 --immediate=120 -t 10 bash -c "for i in \$(seq $N); do s=\$(date +%s%N); srun -Q $* true; e=\$(date +%s%N); echo \$(( (e - s) / 1000000 )); done" 2>/dev/null |
    sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}

: > "$conf"
none=$(median_ms "")
printf "%s\n" "$saved" > "$conf"
loaded=$(median_ms "")
recording=$(median_ms "--slurmwatch=5")
echo "srun true, median of $N (ms): no plugin $none | plugin loaded, not asked $loaded | recording $recording"
