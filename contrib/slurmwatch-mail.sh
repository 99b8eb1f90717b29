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
# waited for. A mail of a recorded job is held (at most SLURMWATCH_MAIL_HOLD seconds) until
# the EpilogSlurmctld has stored its summary, so the report has the recorded figures.
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
#   SLURMWATCH_MAIL_HOLD=90             # seconds a mail may wait for the job's summary
#   SLURMWATCH_REPORT_BIN=              # the program that writes the report (default SLURMWATCH_BIN)
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

if [ -z "$job" ] || [ ! -x "$bin" ]; then
  exec "$mailer" "$@"
fi
tmp=$(mktemp -d 2>/dev/null) || exec "$mailer" "$@"
if ! cat > "$tmp/body"; then
  rm -rf "$tmp"
  exec "$mailer" "$@" </dev/null
fi
# `slurmwatch mail-hold` queues the mail on this controller (StateSaveLocation/slurmwatch-mail)
# and returns at once; a detached deliverer sends it once the EpilogSlurmctld has stored the
# job's summary in slurmdbd (or at most SLURMWATCH_MAIL_HOLD seconds later), with the report
# appended: Slurm mails as the job ends, before the summary is there, and the controller has
# no spool. The report asks sacct every 2 s until slurmdbd has the job's end record (at most
# SLURMWATCH_MAIL_SACCT_WAIT seconds), runs at most SLURMWATCH_MAIL_TIMEOUT seconds more, and
# is left out when it fails. `--owner`: no report unless sacct says the job is the user's Slurm
# named. Without the queue (no EpilogSlurmctld of ours), it does all that now and sends.
wait_s=${SLURMWATCH_MAIL_SACCT_WAIT:-10}
digits "$wait_s" || wait_s=10
hold=${SLURMWATCH_MAIL_HOLD:-90}
digits "$hold" || hold=90
"$bin" mail-hold --job "$job" --job-id "$id" --user "$user" --hold "$hold" --report-timeout "$limit" \
  --sacct-wait "$wait_s" --report-bin "${SLURMWATCH_REPORT_BIN:-$bin}" -- "$mailer" "$@" <"$tmp/body"
rc=$?
# 0: queued or sent; 1: the mailer refused it (as it would have anyway). Anything else is
# slurmwatch failing (a crash, a signal, a bad install): the mail goes as Slurm wrote it.
if [ "$rc" -gt 1 ]; then
  "$mailer" "$@" <"$tmp/body"
  rc=$?
fi
rm -rf "$tmp"
exit $rc
