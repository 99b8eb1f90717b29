#!/usr/bin/env bash
# The one release build of what the packages hold: the plugin, slurmwatch, slurmwatch-epilog,
# the TCP shim and slurmwatch-dbd-comment, always as one set. Cargo unifies dependency features
# over the packages a command selects, so each different -p set compiles the shared dependencies
# (syn, serde, ratatui, nvml-wrapper …) again with other features: a second set cost the test
# command 90 s. Extra arguments go to cargo (--features slurmwatch-plugin/fault-injection).
# SLURM_INCLUDE_DIR and SLURM_LIB_DIR, when set, rebuild only the plugin and
# slurmwatch-dbd-comment (their build scripts read them; no other crate has one).
#   scripts/cargo-release.sh [cargo build arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo build --release --locked -p slurmwatch-plugin -p slurmwatch-cli -p slurmwatch-quickack \
  -p slurmwatch-epilog -p slurmwatch-dbd-comment ${CARGO_JOBS:+-j "$CARGO_JOBS"} "$@"
