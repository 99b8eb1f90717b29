#!/usr/bin/env bash
# The main job: build slurmwatch, bring up a local single-node Slurm with the plugin, submit
# examples/job.sh (which carries `#SBATCH --slurmwatch=1`) and show what slurmwatch recorded.
# Safe to run twice; leaves the cluster running (scripts/cluster.sh down stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
scripts/cargo-release.sh
scripts/cluster.sh up cgroup target/release/libslurmwatch.so

dir=/tmp/slurmwatch-demo
install -d -m 1777 "$dir"
cp examples/job.sh "$dir/job.sh"
id=$(cd "$dir" && sbatch --parsable --output="$dir/%j.out" job.sh)
echo "submitted job $id (examples/job.sh); waiting for it to finish..."
# shellcheck source=scripts/wait-until.sh
. scripts/wait-until.sh
left_queue() { [ -z "$(squeue -h -j "$id" 2>/dev/null)" ]; }
wait_until 300 "job $id to leave the queue" left_queue
sleep 1
echo
echo "== the job's output"
cat "$dir/$id.out"
echo
echo "== what the plugin did for job $id (slurmd log)"
grep -F "[$id." /var/log/slurm/slurmd.log | grep slurmwatch || echo "(nothing: the plugin did not run)"
# The plugin's job_epilog writes the summary a moment after the job leaves the queue.
for _ in $(seq 20); do
  sqlite3 "/var/spool/slurmwatch/$id.sqlite" "select 1 from summary limit 1" >/dev/null 2>&1 && break
  sleep 0.5
done
echo
echo "== slurmwatch report $id"
target/release/slurmwatch report "$id" || true
echo
echo "Also try: target/release/slurmwatch report $id --json | head; target/release/slurmwatch doctor"
