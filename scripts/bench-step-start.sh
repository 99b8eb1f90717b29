#!/usr/bin/env bash
# Step start latency added by the plugin: wall time of `srun true` inside one allocation,
# with no plugin loaded, with the plugin loaded but not asked, and recording. The three are
# interleaved round by round (order rotated), so a drift of the machine's speed during the run
# falls on all three alike; medians and quartiles of N rounds. Needs the test cluster
# (scripts/cluster.sh up); restores plugstack.conf afterwards.
#
#   BUILDS="A.so B.so" scripts/bench-step-start.sh   compares two builds, each recording,
#   interleaved the same way with no plugin (plugstack.conf names the build for each step;
#   swapping the installed .so between steps did not take effect reliably).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-21}
conf=/etc/slurm/plugstack.conf
saved=$(cat "$conf")
out=$(mktemp)
copy=$(mktemp) # root writes it: never a fixed name in /tmp
trap 'printf "%s\n" "$saved" > "$conf"; rm -f "$out" "$copy"' EXIT
cp "$conf" "$copy"

# One round: each variant once, its order rotated by the round number. srun reads
# plugstack.conf, and slurmstepd reads it at each step start, so a variant is the file's
# content at that moment. Bounded: the allocation within 120 s, the steps within 10 min.
read -r build_a build_b <<< "${BUILDS:-}"
if [ -n "${BUILDS:-}" ]; then
  for so in "$build_a" "$build_b"; do [ -r "$so" ] || { echo "no build at $so" >&2; exit 2; }; done
  spool=$(grep -ho 'spool=[^ ]*' /etc/slurm/plugstack.conf.d/*.conf "$conf" 2>/dev/null | head -1)
  variants="none a b"
else
  variants="none loaded recording"
fi
salloc -Q -n1 --immediate=120 -t 10 bash -c '
  conf='"$conf"'; saved='"$copy"'; a='"${build_a:-}"'; b='"${build_b:-}"'; spool='"${spool:-}"'
  one() { # NAME: time one srun true
    case $1 in
      none) : > "$conf"; args="" ;;
      loaded) cp "$saved" "$conf"; args="" ;;
      recording) cp "$saved" "$conf"; args="--slurmwatch=5" ;;
      a) echo "optional $a $spool" > "$conf"; args="--slurmwatch=5" ;;
      b) echo "optional $b $spool" > "$conf"; args="--slurmwatch=5" ;;
    esac
    s=$(date +%s%N); srun -Q $args true; e=$(date +%s%N)
    echo "$1 $(( (e - s) / 1000000 ))"
  }
  v=('"$variants"')
  for i in $(seq '"$N"'); do
    for j in 0 1 2; do one ${v[$(( (i + j) % 3 ))]}; done
  done' 2>/dev/null > "$out"

stat() { # NAME -> "median (p25–p75)"
  grep "^$1 " "$out" | awk '{print $2}' | sort -n |
    awk '{a[NR]=$1} END {if (!NR) {print "n/a"; exit} q1=a[int((NR+3)/4)]; q3=a[int((3*NR+1)/4)]
      m=(NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); printf "%s (%s–%s)", m, q1, q3}'
}
if [ -n "${BUILDS:-}" ]; then
  echo "srun true, $N interleaved rounds, median (quartiles) in ms: no plugin $(stat none) | $build_a recording $(stat a) | $build_b recording $(stat b)"
else
  echo "srun true, $N interleaved rounds, median (quartiles) in ms: no plugin $(stat none) | plugin loaded, not asked $(stat loaded) | recording $(stat recording)"
fi
