#!/bin/sh
# slurmwatch's MailProg: Slurm's end-of-job mail with the job's report appended. In slurm.conf:
#   MailProg=/usr/share/slurmwatch/slurmwatch-mail.sh
# Slurm runs it (on the slurmctld host, as SlurmUser) as it runs mail(1):
#   slurmwatch-mail.sh -s "Slurm Job_id=123 Name=x Ended, Run time 00:00:05, COMPLETED, ExitCode 0" user
# For an `Ended` or `Failed` mail of one job or array task (--mail-type=END, FAIL or ALL) it
# appends `slurmwatch report JOB` to the body; every other mail (Began, an array's summary,
# time-limit warnings) passes through untouched. The arguments always reach the real mailer
# unchanged, and the mail is always sent: a report that fails, crashes or outlasts its time
# (SLURMWATCH_MAIL_TIMEOUT seconds, plus the wait for slurmdbd; then killed) is left out, never
# waited for.
# Which job, and whose, come from the environment slurmctld gives MailProg (SLURM_JOB_ID,
# SLURM_ARRAY_JOB_ID/SLURM_ARRAY_TASK_ID, SLURM_JOB_USER, SLURM_JOB_MAIL_TYPE; docs/admin.md),
# never from the subject's text: after `Name=` it is the job's name, which its user chose and
# which may hold newlines. The report is of a job sacct says is that user's (`--owner`).
# Settings, all optional, in /etc/slurm/slurmwatch-mail.conf (shell syntax; the path may be
# overridden with SLURMWATCH_MAIL_CONF):
#   SLURMWATCH_MAILER=/usr/bin/mail     # the real MailProg
#   SLURMWATCH_BIN=/usr/bin/slurmwatch
#   SLURMWATCH_MAIL_TIMEOUT=20          # seconds the report may take
#   SLURMWATCH_MAIL_SACCT_WAIT=10       # seconds to wait for slurmdbd's end record
conf=${SLURMWATCH_MAIL_CONF:-/etc/slurm/slurmwatch-mail.conf}
# shellcheck source=/dev/null
[ -r "$conf" ] && . "$conf"
mailer=${SLURMWATCH_MAILER:-/usr/bin/mail}
bin=${SLURMWATCH_BIN:-/usr/bin/slurmwatch}
limit=${SLURMWATCH_MAIL_TIMEOUT:-20}

# The subject is the argument after -s.
subject=
prev=
for a in "$@"; do
  if [ "$prev" = "-s" ]; then subject=$a; break; fi
  prev=$a
done

# The job: an array task by its array id and index (`sacct -j 123` would answer every task of
# the array), else its id. An array's summary mail has the same variables as one of its tasks'
# mails (seen on 22.05: SLURM_JOB_ID and SLURM_ARRAY_TASK_ID of the task the array's record
# ended as), so the subject must begin as Slurm writes it for one job with exactly these ids:
# the text before `Name=` is Slurm's alone. A summary's (`Slurm Array Summary Job_id=123_*`)
# does not, and gets no report.
digits() { case $1 in "" | *[!0-9]*) return 1 ;; esac; }
job=
one=
user=${SLURM_JOB_USER-}
id=${SLURM_JOB_ID-}
array=${SLURM_ARRAY_JOB_ID-}
task=${SLURM_ARRAY_TASK_ID-}
case ${SLURM_JOB_MAIL_TYPE-} in
  Ended | Failed)
    if [ -z "$array" ] && digits "$id"; then
      job=$id
      one="Slurm Job_id=$id Name="
    elif digits "$id" && digits "$array" && digits "$task"; then
      job=${array}_$task
      one="Slurm Array Task Job_id=$job ($id) Name="
    fi
    ;;
esac
case $subject in
  "$one"*) ;;
  *) job= ;;
esac
[ -n "$one" ] && [ -n "$user" ] || job=
digits "$limit" || limit=20

if [ -z "$job" ] || [ ! -x "$bin" ] || ! command -v timeout >/dev/null 2>&1; then
  exec "$mailer" "$@"
fi
tmp=$(mktemp -d 2>/dev/null) || exec "$mailer" "$@"
if ! cat > "$tmp/body"; then
  rm -rf "$tmp"
  exec "$mailer" "$@" </dev/null
fi
# Slurm mails as the job ends, often before slurmdbd has the job's whole record: the report
# asks sacct every 2 s until it has (at most SLURMWATCH_MAIL_SACCT_WAIT seconds); its last
# answer is the report's, so the wait costs slurmdbd no query of its own. `--owner`: no report
# unless sacct's record says the job is the user's Slurm named. Bounded: SIGTERM after the
# wait and the limit, SIGKILL 2 s later. Only a report that exited 0 is appended.
wait_s=${SLURMWATCH_MAIL_SACCT_WAIT:-10}
digits "$wait_s" || wait_s=10
if timeout -k 2 $((limit + wait_s)) "$bin" report --no-log --sacct-timeout "$limit" \
  --wait-ended "$wait_s" --owner "$user" "$job" \
  >"$tmp/report" 2>/dev/null </dev/null && [ -s "$tmp/report" ]; then
  if { cat "$tmp/body" && { [ ! -s "$tmp/body" ] || echo; } && head -c 262144 "$tmp/report"; } >"$tmp/mail"; then
    mv "$tmp/mail" "$tmp/body" 2>/dev/null
  fi
fi
"$mailer" "$@" <"$tmp/body"
rc=$?
rm -rf "$tmp"
exit $rc
