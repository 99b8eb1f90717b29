#!/usr/bin/env bash
# slurmwatch history/sizing side by side with slurmpast 0.9.0 (PyPI) on the same generated
# 10,000-job history (issue 7, "Measure"): end-to-end wall and CPU time (median of RUNS=5),
# the time spent inside sacct and after it returns, and what each tool says about the jobs.
#
# No Slurm needed and none touched: both tools get a fake `sacct` (scripts/fake-sacct.py)
# answering from one dataset, `cargo run --example history_fixture` (the generator of the
# `history` bench and tests, core/src/history/fixture.rs); `scontrol`, `sinfo`, `squeue` and
# `sstat` are stubs that fail as on a host with no controller. Idempotent; the only network
# use is pip fetching slurmpast into target/slurmpast-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
target=$(realpath -m "${CARGO_TARGET_DIR:-target}")
venv=target/slurmpast-venv
work=target/slurmpast-bench
export TZ=UTC # the dataset's times, both tools' reading of them and the window agree

# 1. slurmpast 0.9.0 in a venv.
if ! "$venv/bin/slurmpast" --version 2>/dev/null | grep -qx 'slurmpast 0.9.0'; then
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install -q slurmpast==0.9.0; then
    echo "bench-vs-slurmpast: pip could not install slurmpast==0.9.0 from PyPI; nothing compared." >&2
    exit 1
  fi
fi

# 2. slurmwatch and the dataset.
cargo build -q --release -p slurmwatch-cli --bin slurmwatch
cargo build -q --release -p slurmwatch-core --example history_fixture
mkdir -p "$work/bin"
"$target/release/examples/history_fixture" > "$work/history.json.tmp"
if cmp -s "$work/history.json.tmp" "$work/history.json"; then
  rm "$work/history.json.tmp"
else
  mv "$work/history.json.tmp" "$work/history.json"
fi
ln -sf "$PWD/scripts/fake-sacct.py" "$work/bin/sacct"
for c in scontrol sinfo squeue sstat; do
  printf '#!/bin/sh\necho "%s: error: Unable to contact slurm controller (connect failure)" >&2\nexit 1\n' "$c" > "$work/bin/$c"
  chmod +x "$work/bin/$c"
done

# The window: the whole history (10,000 jobs a minute apart from fixture::T0, 2026-09-21).
export SW="$target/release/slurmwatch" SP="$PWD/$venv/bin/slurmpast"
export WORK="$PWD/$work" FAKEBIN="$PWD/$work/bin" FAKE_SACCT_DATA="$PWD/$work/history.json"
export SINCE=2026-09-21T00:00:00 UNTIL=2026-09-30T00:00:00 RUNS=${RUNS:-5}
echo "$("$SW" --version) ($(git rev-parse --short HEAD)) | $("$SP" --version) | $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
# 3-5. Time, compare, summarise.
python3 scripts/bench-vs-slurmpast.py
