#!/usr/bin/env bash
# Every benchmark of what users pay (issue 19), one after another, each beside its floor or
# peer: the report against one bare sacct and reportseff; `--once --json` against Python
# slurmwatch 1.2.4; the sampler's CPU and bytes per stored row inside real jobs at 1 s and 5 s;
# step start with and without the plugin; the epilog on a 7-day file; the live view of a
# running 7-day job. Each script prints its own medians and differences; this one only runs
# them. Needs the test cluster up
# (scripts/cluster.sh up cgroup target/release/libslurmwatch.so); about 10 minutes.
# QUICK=1 takes fewer runs (N=7, 30-s sampler jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
if [ "${QUICK:-0}" = 1 ]; then n=7 d=30; else n=21 d=60; fi
sinfo -h >/dev/null 2>&1 || { echo "bench: no cluster answers: scripts/cluster.sh up cgroup target/release/libslurmwatch.so"; exit 2; }
cargo build -q --release --locked -p slurmwatch-cli --bin slurmwatch

echo "== report latency (scripts/bench-report.sh)"
N=$n scripts/bench-report.sh
echo "== live view, --once --json (scripts/bench-vs-python.sh)"
N=$n scripts/bench-vs-python.sh
echo "== sampler inside real jobs (scripts/bench-sampler.sh)"
D=$d scripts/bench-sampler.sh
echo "== step start (scripts/bench-step-start.sh)"
N=$n scripts/bench-step-start.sh
echo "== epilog and report on a generated 7-day file (cargo bench --bench report)"
cargo bench -q --locked -p slurmwatch-core --bench report 2>&1 | grep -v '^$'
echo "== the live view of a running 7-day job: first snapshot and each refresh (examples/live_cost.rs)"
cargo run -q --release --locked -p slurmwatch-core --example live_cost
