#!/bin/sh
# slurmwatch's EpilogSlurmctld: stores each finished job's summary (collected from its nodes'
# `slurmwatch metrics --listen`) as its AdminComment in slurmdbd. In slurm.conf:
#   EpilogSlurmctld=/usr/share/slurmwatch/slurmctld-epilog.sh
# (or call it from the site's own EpilogSlurmctld). The endpoint and the bound are the site's
# (/etc/slurmwatch/site.toml, [summary] url and timeout_seconds; docs/reference/site.md).
# Settings, all optional, in /etc/slurm/slurmwatch-ctld.conf (shell syntax):
#   SLURMWATCH_BIN=/usr/bin/slurmwatch
#   SLURMWATCH_LOG=/var/log/slurm/slurmwatch-ctld.log   (else syslog)
#   SLURMWATCH_SUMMARY_URL, SLURMWATCH_TIMEOUT: override the site file's [summary] for this host
# Always exits 0: a failing EpilogSlurmctld is only logged by slurmctld, and the job is done.
conf=/etc/slurm/slurmwatch-ctld.conf
# shellcheck source=/dev/null
[ -r "$conf" ] && . "$conf"
bin=${SLURMWATCH_BIN:-/usr/bin/slurmwatch}
[ -x "$bin" ] || exit 0
set --
[ -n "${SLURMWATCH_SUMMARY_URL:-}" ] && set -- "$@" --url "$SLURMWATCH_SUMMARY_URL"
[ -n "${SLURMWATCH_TIMEOUT:-}" ] && set -- "$@" --timeout "$SLURMWATCH_TIMEOUT"
"$bin" ctld-epilog "$@" 2>&1 |
  if [ -n "${SLURMWATCH_LOG:-}" ]; then cat >> "$SLURMWATCH_LOG"; else logger -t slurmwatch-ctld-epilog; fi
exit 0
