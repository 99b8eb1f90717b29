#!/bin/sh
# slurmwatch's MailProg: Slurm's end-of-job mail with the job's report appended. In slurm.conf:
#   MailProg=/usr/share/slurmwatch/slurmwatch-mail.sh
# Slurm runs it (on the slurmctld host, as SlurmUser) as it runs mail(1):
#   slurmwatch-mail.sh -s "Slurm Job_id=123 Name=x Ended, Run time 00:00:05, COMPLETED, ExitCode 0" user
# For an `Ended` or `Failed` mail of one job or array task (--mail-type=END, FAIL or ALL) it
# appends `slurmwatch report JOB` to the body; every other mail (Began, an array's summary,
# time-limit warnings) passes through untouched. The arguments always reach the real mailer
# unchanged, and the mail is always sent: a report that fails, crashes or outlasts its time
# (SLURMWATCH_MAIL_TIMEOUT seconds, then killed) is left out, never waited for.
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

# `Slurm Job_id=123 Name=…` or `Slurm Array Task Job_id=123_4 (130) Name=…`; an array's
# summary (`Job_id=123_*`) names no one job and gets no report.
job=
case $subject in
  *" Ended, "* | *" Failed, "*)
    job=$(printf '%s\n' "$subject" |
      sed -n 's/^Slurm [A-Za-z ]*Job_id=\([0-9][0-9]*\(_[0-9][0-9]*\)\{0,1\}\)[ ,].*/\1/p' | head -n 1)
    ;;
esac

if [ -z "$job" ] || [ ! -x "$bin" ] || ! command -v timeout >/dev/null 2>&1; then
  exec "$mailer" "$@"
fi
tmp=$(mktemp -d 2>/dev/null) || exec "$mailer" "$@"
if ! cat > "$tmp/body"; then
  rm -rf "$tmp"
  exec "$mailer" "$@" </dev/null
fi
# Slurm sends the end mail as the job ends, often before slurmdbd has the end record, or the
# job at all (seen on the test cluster: the report then said PENDING, or had no name, limit or
# request). Wait for it, bounded: an empty answer, a record not yet ended, or slurmdbd's partial
# record (the end arrived before the start: no ReqTRES, name `allocation`, for up to ~5 s) is
# waited for; a sacct that fails (no accounting, slurmdbd down) is not.
sacct_wait=${SLURMWATCH_MAIL_SACCT_WAIT:-10}
if command -v sacct >/dev/null 2>&1; then
  until_s=$(($(date +%s) + sacct_wait))
  while [ "$(date +%s)" -lt "$until_s" ]; do
    out=$(timeout -k 1 3 sacct -n -X -P -j "$job" -o End,ReqTRES,State 2>/dev/null) || break
    line=$(printf '%s\n' "$out" | head -n 1)
    # End|ReqTRES|State: no end yet, no request (partial), or a state not yet final.
    case $line in
      "" | Unknown"|"* | None"|"* | *"||"* | *"|PENDING"* | *"|RUNNING"* | *"|REQUEUED"* | *"|RESIZING"* | *"|SUSPENDED"*) sleep 0.5 ;;
      *) break ;;
    esac
  done
fi
# Bounded: SIGTERM at the limit, SIGKILL 2 s later. Only a report that exited 0 is appended.
if timeout -k 2 "$limit" "$bin" report --no-log --sacct-timeout "$limit" "$job" \
  >"$tmp/report" 2>/dev/null </dev/null && [ -s "$tmp/report" ]; then
  if { cat "$tmp/body" && { [ ! -s "$tmp/body" ] || echo; } && head -c 262144 "$tmp/report"; } >"$tmp/mail"; then
    mv "$tmp/mail" "$tmp/body" 2>/dev/null
  fi
fi
"$mailer" "$@" <"$tmp/body"
rc=$?
rm -rf "$tmp"
exit $rc
