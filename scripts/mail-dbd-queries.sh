#!/usr/bin/env bash
# What one end-of-job mail costs slurmdbd, on the test cluster (scripts/cluster.sh up, with the
# MailProg wrapper it installs). N jobs of swuser1 with --mail-type=END, then N without mail;
# each batch's change in `sacctmgr show stats` (job queries, DBD_GET_JOBS_COND, and every
# request of any type); the difference per job is the mail's cost (both batches pay the same
# job starts, ends and EpilogSlurmctld).
#
#   scripts/mail-dbd-queries.sh [N]        # default N=40
#
# Prints one line per batch and the per-mail figures. Hold the cluster lock around it.
set -euo pipefail

N=${1:-40}
MAIL_DIR=/var/spool/slurmwatch-test-mail
USER=swuser1
DIR=$(mktemp -d /tmp/mail-dbd-queries.XXXXXX)
chmod 0777 "$DIR"
trap 'rm -rf "$DIR"' EXIT

# "JOBS TOTAL": DBD_GET_JOBS_COND's count and the count of every message type.
stats() {
  sacctmgr show stats | awk '
    /statistics by message type/ { on = 1; next }
    /statistics by user/ { on = 0 }
    on && /count:/ {
      match($0, /count:[0-9]+/); n = substr($0, RSTART + 6, RLENGTH - 6)
      total += n; if ($1 == "DBD_GET_JOBS_COND") jobs = n
    }
    END { print jobs + 0, total + 0 }'
}

mails() { find "$MAIL_DIR" -maxdepth 1 -name '*.mail' | wc -l; }

# Submits N jobs (extra sbatch arguments: $@), waits until they have left the queue and,
# with mail, until N more mails have been sent; prints "JOBS TOTAL" of the batch.
batch() {
  local before_m ids=() a b t0
  read -r a b < <(stats)
  before_m=$(mails)
  for _ in $(seq "$N"); do
    ids+=("$(runuser -u "$USER" -- sbatch --parsable -o /dev/null -D "$DIR" -t 1 --mem=64M "$@" --wrap true)")
  done
  t0=$(date +%s)
  while [ -n "$(squeue -h -u "$USER" -o %i)" ]; do
    [ $(($(date +%s) - t0)) -lt 600 ] || { echo "jobs still queued after 600 s" >&2; exit 1; }
    sleep 1
  done
  if [ "$1" = "--mail-type=END" ]; then
    while [ $(($(mails) - before_m)) -lt "$N" ]; do
      [ $(($(date +%s) - t0)) -lt 600 ] || { echo "mails missing after 600 s" >&2; exit 1; }
      sleep 1
    done
  fi
  # The last mail's report may still be running after its mail was counted: let it finish,
  # and let slurmctld's end records reach slurmdbd.
  sleep 15
  read -r c d < <(stats)
  echo "$((c - a)) $((d - b))"
}

read -r mj mt < <(batch --mail-type=END)
echo "with mail:    $N jobs, $mj job queries, $mt requests in all"
read -r pj pt < <(batch --mail-type=NONE)
echo "without mail: $N jobs, $pj job queries, $pt requests in all"
awk -v n="$N" -v mj="$mj" -v mt="$mt" -v pj="$pj" -v pt="$pt" 'BEGIN {
  printf "per mail: %.2f job queries, %.2f requests in all\n", (mj - pj) / n, (mt - pt) / n }'
