#!/bin/sh
# slurmwatch's EpilogSlurmctld: stores each finished job's summary (collected from its nodes'
# `slurmwatch metrics --listen`) as its AdminComment in slurmdbd. In slurm.conf:
#   EpilogSlurmctld=/usr/share/slurmwatch/slurmctld-epilog.sh
# (or call it from the site's own EpilogSlurmctld). Settings, all optional, in
# /etc/slurm/slurmwatch-ctld.conf (shell syntax):
#   SLURMWATCH_BIN=/usr/bin/slurmwatch
#   SLURMWATCH_SUMMARY_URL='http://{node}:9944/jobs/{job}/summary'
#   SLURMWATCH_TIMEOUT=60
# Always exits 0: a failing EpilogSlurmctld is only logged by slurmctld, and the job is done.
conf=/etc/slurm/slurmwatch-ctld.conf
# shellcheck source=/dev/null
[ -r "$conf" ] && . "$conf"
bin=${SLURMWATCH_BIN:-/usr/bin/slurmwatch}
[ -x "$bin" ] || exit 0
url=${SLURMWATCH_SUMMARY_URL:-'http://{node}:9944/jobs/{job}/summary'}
"$bin" ctld-epilog --url "$url" --timeout "${SLURMWATCH_TIMEOUT:-60}" 2>&1 |
  if [ -n "${SLURMWATCH_LOG:-}" ]; then cat >> "$SLURMWATCH_LOG"; else logger -t slurmwatch-ctld-epilog; fi
exit 0
