#!/usr/bin/env bash
# The sampler's own cost inside real recorded jobs, read from the jobs' own counters (every
# row carries the sampler thread's CPU, RUSAGE_THREAD, and its bytes written, wchar): the
# median per stored row at --slurmwatch=5 (the default: a row and four 1-s fast reads) and at
# --slurmwatch=1 (a row a second). Beside them, where that CPU goes: a third job of the same
# shape runs the sampler's own code part by part (core/examples/sampler_parts.rs: the
# wake-up, a fast read, a stored row's reading and its commit, each on the thread's CPU
# clock after a second's sleep), and its wake-up is this machine's floor — the CPU a thread
# that only waits as the sampler waits is charged per wake-up inside a job (scheduler and
# timer work; on this VM 30–87 µs, moving with the host).
# Needs the test cluster (scripts/cluster.sh up). D=seconds per job (default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-60}
user=${BENCH_USER:-swuser1}
spool=${SPOOL:-/var/spool/slurmwatch}
work=$(mktemp -d /tmp/bench-sampler.XXXXXX)
chown "$user" "$work"
trap 'rm -rf "$work"' EXIT

# Two processes: one holding 200 MiB, the shell with 100 MiB of page cache written.
cat > "$work/job.sh" <<EOF
#!/bin/bash
python3 - <<'PY' &
import time
b = bytearray(200 << 20)
for i in range(0, len(b), 4096): b[i] = 1
t = time.time() + $D
while time.time() < t:
    time.sleep(0.05)
PY
dd if=/dev/zero of=$work/cache.\$SLURM_JOB_ID bs=1M count=100 2>/dev/null
# The parts job also times the sampler's code on its own cgroup.
[ "\${PARTS:-}" ] && "$work/sampler_parts" $D "$work"
wait
rm -f $work/cache.\$SLURM_JOB_ID
EOF
chmod 755 "$work/job.sh"

cargo build -q --release -p slurmwatch-core --example sampler_rows --example sampler_parts
rows=target/release/examples/sampler_rows
# Copied: the job's user runs it.
install -m 755 target/release/examples/sampler_parts "$work/sampler_parts"

submit() { su "$user" -c "cd $work && sbatch --parsable -c1 --mem=1G -t 10 $*"; }
j5=$(submit --slurmwatch=5 -o "$work/o5.txt" "$work/job.sh")
j1=$(submit --slurmwatch=1 -o "$work/o1.txt" "$work/job.sh")
jf=$(submit --export=ALL,PARTS=1 -o "$work/parts.txt" "$work/job.sh")
echo "jobs: $j5 (every 5 s), $j1 (every 1 s), $jf (the sampler's parts and the wake-up floor); $D s each"
# shellcheck source=scripts/wait-until.sh
. scripts/wait-until.sh
left_queue() { ! squeue -h -j "$j5,$j1,$jf" 2>/dev/null | grep -q .; }
# The jobs run side by side (time limit 10 min): D s, then the epilog.
wait_until $((D + 300)) "jobs $j5 $j1 $jf to leave the queue" left_queue

parts=$(grep '^wake-up' "$work/parts.txt" || true)
floor=$(sed -n 's/^wake-up \([0-9]*\) µs.*/\1/p' <<<"$parts")
if [ -z "$floor" ]; then
  echo "the parts job $jf printed no figures: $(tail -c 400 "$work/parts.txt")" >&2
  exit 1
fi
r5=$("$rows" "$spool/$j5.sqlite")
r1=$("$rows" "$spool/$j1.sqlite")
echo "at --slurmwatch=5: $r5"
echo "at --slurmwatch=1: $r1"
echo "the sampler's code part by part, cold after each second's sleep: $parts"
median() { sed -n 's/.*per stored row median \([0-9]*\) µs.*/\1/p' <<<"$1"; }
m5=$(median "$r5")
m1=$(median "$r1")
echo "floor: a thread waiting 1 s as the sampler waits, inside a job, is charged $floor µs CPU per wake-up"
awk -v m5="$m5" -v m1="$m1" -v f="$floor" 'BEGIN {
  printf "row at 5 s: %d µs = %.1f× the floor of 5 wake-ups (%d µs); above it: %d µs\n", m5, m5 / (5 * f), 5 * f, m5 - 5 * f
  printf "row at 1 s: %d µs = %.1f× the floor of 1 wake-up; above it: %d µs\n", m1, m1 / f, m1 - f
  printf "fast read (estimated from the two jobs): %.0f µs, of which the wake-up %d µs: %.0f µs of work\n", (m5 - m1) / 4, f, (m5 - m1) / 4 - f
}'
