#!/usr/bin/env bash
# What one end-of-job mail costs slurmdbd, on the test cluster (scripts/cluster.sh up, with the
# MailProg wrapper it installs). N jobs of swuser1 with --mail-type=END, then N without mail;
# each batch's change in `sacctmgr show stats` (job queries, DBD_GET_JOBS_COND, and every
# request of any type); the difference per job is the mail's cost (both batches pay the same
# job starts, ends and EpilogSlurmctld).
#
#   scripts/mail-dbd-queries.sh [N]        # default N=40
#   JOB='sleep 6' scripts/mail-dbd-queries.sh 20   # the jobs' command (default: true)
#
# Prints the per-mail figures, by message type and in all. Hold the cluster lock around it.
set -euo pipefail

N=${1:-40}
JOB=${JOB:-true}
MAIL_DIR=/var/spool/slurmwatch-test-mail
USER=swuser1
DIR=$(mktemp -d /tmp/mail-dbd-queries.XXXXXX)
chmod 0777 "$DIR"
trap 'rm -rf "$DIR"' EXIT

# Every message type's count so far, one "TYPE COUNT" a line.
stats() {
  sacctmgr show stats | awk '
    /statistics by message type/ { on = 1; next }
    /statistics by user/ { on = 0 }
    on && /count:/ { match($0, /count:[0-9]+/); print $1, substr($0, RSTART + 6, RLENGTH - 6) }'
}

mails() { find "$MAIL_DIR" -maxdepth 1 -name '*.mail' | wc -l; }

# Submits N jobs (extra sbatch arguments: $@), waits until they have left the queue and,
# with mail, until N more mails have been sent; writes each message type's count before and
# after to $DIR/$TAG.before and $DIR/$TAG.after.
batch() {
  local tag=$1 before_m t0
  shift
  stats >"$DIR/$tag.before"
  before_m=$(mails)
  for _ in $(seq "$N"); do
    runuser -u "$USER" -- sbatch --parsable -o /dev/null -D "$DIR" -t 1 --mem=64M "$@" --wrap "$JOB" >/dev/null
  done
  t0=$(date +%s)
  while [ -n "$(squeue -h -u "$USER" -o %i)" ]; do
    [ $(($(date +%s) - t0)) -lt 600 ] || { echo "jobs still queued after 600 s" >&2; exit 1; }
    sleep 1
  done
  if [ "$tag" = mail ]; then
    while [ $(($(mails) - before_m)) -lt "$N" ]; do
      [ $(($(date +%s) - t0)) -lt 600 ] || { echo "mails missing after 600 s" >&2; exit 1; }
      sleep 1
    done
  fi
  # Let slurmctld's end records and the EpilogSlurmctld's reach slurmdbd.
  sleep 15
  stats >"$DIR/$tag.after"
}

batch mail --mail-type=END
batch plain --mail-type=NONE
# Per message type: (with mail − without) ÷ N, then the job queries and all requests.
awk -v n="$N" '
  { key = FILENAME; sub(/.*\//, "", key); c[key, $1] = $2; types[$1] = 1 }
  END {
    for (t in types) {
      d = ((c["mail.after", t] - c["mail.before", t]) - (c["plain.after", t] - c["plain.before", t])) / n
      all += d; if (t == "DBD_GET_JOBS_COND") jobs = d
      if (d >= 0.05 || d <= -0.05) printf "  %-24s %6.2f a mail\n", t, d
    }
    printf "per mail (%d jobs with --mail-type=END against %d without): %.2f job queries (DBD_GET_JOBS_COND), %.2f requests in all\n", n, n, jobs, all
  }' "$DIR/mail.before" "$DIR/mail.after" "$DIR/plain.before" "$DIR/plain.after"
