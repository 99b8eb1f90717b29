#!/usr/bin/env bash
# The real-GPU check: on a machine with an NVIDIA driver, builds slurmwatch's GPU collector
# and prints every reading of every card, the verdicts, the wiring between cards, and the
# cost of each NVML call and of one card's reading (the fake NVML's figures are in
# core/benches/gpu.rs). Run it whenever a GPU machine is available and note the figures.
#
#   scripts/gpu-check.sh [path/to/libnvidia-ml.so.1] [reads]
#
# Cards: those in CUDA_VISIBLE_DEVICES (run it inside a job to see a job's view), else all.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
lib=${1:-libnvidia-ml.so.1}
reads=${2:-200}
command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "gpu-check: no nvidia-smi (continuing)"
cargo build --release -p slurmwatch-core --example gpu_check
target=${CARGO_TARGET_DIR:-target}
"$target/release/examples/gpu_check" "$lib" "$reads"
