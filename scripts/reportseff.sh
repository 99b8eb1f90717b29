#!/usr/bin/env bash
# Runs reportseff (PyPI, the version pinned here) from a private venv, creating it on first
# use: the cluster tests compare its efficiencies, read from the job's AdminComment, with
# `slurmwatch report`'s (tests/cluster/jobstats.rs). Idempotent; the venv lives under
# target/ (or $REPORTSEFF_VENV).
#   scripts/reportseff.sh [reportseff args...]
set -euo pipefail
VERSION=2.10.3
REPO=$(cd "$(dirname "$0")/.." && pwd)
venv=${REPORTSEFF_VENV:-$REPO/target/reportseff-venv}
if ! [ -x "$venv/bin/reportseff" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q "reportseff==$VERSION" >&2 ||
    { echo "reportseff.sh: pip could not install reportseff $VERSION from PyPI" >&2; exit 2; }
fi
exec "$venv/bin/reportseff" "$@"
