#!/usr/bin/env bash
# Side by side with the Python tools this project replaces, on the same running job:
# slurmwatch 1.2.4 (live `--once --json`) and, for a finished job, slurmpast 0.9.0.
# Installs them in a throwaway venv under /tmp (PyPI). Needs the test cluster
# (scripts/cluster.sh up) and a release build (cargo build --release -p slurmwatch-cli).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20}
venv=/tmp/slurmwatch-bench-venv
[ -x "$venv/bin/slurmpast" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q slurmwatch==1.2.4 slurmpast==0.9.0; }
ours=target/release/slurmwatch

dir=$(mktemp -d /tmp/sw-bench.XXXX); chmod 1777 "$dir"
cat > "$dir/job.sh" <<'JOB'
#!/bin/bash
burn() { local end=$((SECONDS + $1)); while ((SECONDS < end)); do :; done; }
burn 40 &
python3 -c 'b = bytearray(200 << 20); import time; time.sleep(40)'
wait
JOB
id=$(cd "$dir" && sbatch --parsable --slurmwatch=1 --mem=500M -c2 -o /dev/null job.sh)
# shellcheck source=scripts/wait-until.sh
. scripts/wait-until.sh
running() { [ "$(squeue -h -j "$id" -o %T)" = RUNNING ]; }
left_queue() { [ -z "$(squeue -h -j "$id")" ]; }
wait_until 120 "job $id to start" running
sleep 5

median_ms() { # COMMAND...
  for _ in $(seq "$N"); do
    s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); echo $(( (e - s) / 1000000 ))
  done | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}
ours_ms=$(median_ms "$ours" "$id" --once --json)
py_ms=$(median_ms "$venv/bin/slurmwatch" "$id" --once --json)
echo "live --once --json on running job $id, median of $N: slurmwatch (this) ${ours_ms} ms | slurmwatch 1.2.4 (Python) ${py_ms} ms"
echo "-- this:";   "$ours" "$id" --once --json | head -c 600; echo
echo "-- python:"; "$venv/bin/slurmwatch" "$id" --once --json 2>&1 | head -c 600; echo
scancel "$id"
wait_until 60 "job $id to leave the queue" left_queue
sleep 2
ours_ms=$(median_ms "$ours" report "$id" --json)
py_ms=$(median_ms "$venv/bin/slurmpast" --json --no-cache "$id")
echo "post-mortem of job $id, median of $N: slurmwatch report (this) ${ours_ms} ms | slurmpast 0.9.0 ${py_ms} ms"
rm -rf "$dir"
