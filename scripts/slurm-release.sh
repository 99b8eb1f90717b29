#!/usr/bin/env bash
# Prints the Slurm major.minor (e.g. 22.05) a slurm_version.h describes, and with --next the
# release after it (22.06: the first a package built for 22.05 must refuse). Plain bash
# arithmetic: the packaging scripts must run on a stock Debian (mawk, no gawk strtonum).
#   scripts/slurm-release.sh [--next] [HEADER]   (default: $SLURM_INCLUDE_DIR or /usr/include)
set -euo pipefail
next=0
if [ "${1:-}" = --next ]; then next=1; shift; fi
header=${1:-${SLURM_INCLUDE_DIR:-/usr/include}/slurm/slurm_version.h}
hex=$(sed -n 's/^#define[[:space:]]\{1,\}SLURM_VERSION_NUMBER[[:space:]]\{1,\}\(0x[0-9a-fA-F]\{1,\}\).*/\1/p' "$header")
[ -n "$hex" ] || { echo "slurm-release.sh: no SLURM_VERSION_NUMBER in $header" >&2; exit 1; }
major=$(((hex >> 16) & 255))
minor=$(((hex >> 8) & 255))
printf '%d.%02d\n' "$major" $((minor + next))
