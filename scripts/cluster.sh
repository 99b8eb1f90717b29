#!/usr/bin/env bash
# A real single-node Slurm 22.05 (munged, mariadbd, slurmdbd, slurmctld, slurmd) started
# without systemd, with slurmwatch's plugin loaded through plugstack.conf.
#
#   scripts/cluster.sh up [cgroup|proc] [PLUGIN.so] [plugstack args...]
#   NODES=3 scripts/cluster.sh up ...     # several slurmd on this one machine (sw1..sw3)
#   scripts/cluster.sh reinstall [PLUGIN.so]   # replace the plugin only, no restart
#   scripts/cluster.sh down
#   scripts/cluster.sh wipe          # down, then forget all jobs and accounting
#
# cgroup mode: proctrack/cgroup + jobacct_gather/cgroup (each job gets a cgroup).
# proc mode:   proctrack/linuxproc + jobacct_gather/linux (no job cgroup: the /proc path).
# Every daemon is polled for readiness; a timeout names the daemon and its log.
set -euo pipefail

CLUSTER=swtest
NODE=$(hostname -s)
# CLUSTER_ETC is set only by the refusal test (core/tests/scripts.rs).
ETC=${CLUSTER_ETC:-/etc/slurm}
LOGDIR=/var/log/slurm
RUN=/run/slurm
PLUGIN_DIR=/usr/local/lib/slurmwatch
SPOOL=/var/spool/slurmwatch
REPO=$(cd "$(dirname "$0")/.." && pwd)
# Where the EpilogSlurmctld asks for a job's summary; the slurmdbd test serves it there
# (tests/cluster/slurmdbd.rs).
CTLD_SUMMARY_PORT=9944
# Where the test cluster's stand-in mailer keeps each mail (tests/cluster/mail.rs).
MAIL_DIR=/var/spool/slurmwatch-test-mail
# The file under plugstack.conf.d holding the test cluster's slurmwatch line (sorted before
# the package's own, commented slurmwatch.conf; tests/harness rewrites it).
LINE_FILE=plugstack.conf.d/00-test-cluster.conf

# What scripts/site.sh starts the same way (MariaDB, munge, users, the common slurm.conf).
LOG_PREFIX=cluster
# shellcheck source=scripts/slurm-common.sh
. "$REPO/scripts/slurm-common.sh"
# The daemons started here must not inherit the caller's descriptors (a flock(1) lock).
close_inherited_fds

# Four GPUs as count-style GRES, so Slurm itself sets CUDA_VISIBLE_DEVICES / SLURM_JOB_GPUS
# for `--gres=gpu:N` (the fake NVML in tests/fake-nvml serves their readings).
FAKE_GPUS=4

# Several nodes on one machine (docs/design.md §4): every slurmd shares the host name, so each is
# told its node name (`slurmd -N swK`) and gets its own port, spool, PID file and log.
NODES=${NODES:-1}
multi() { [ "$NODES" -gt 1 ]; }
node_names() { if multi; then seq -f "sw%g" 1 "$NODES"; else echo "$NODE"; fi; }

node_lines() { # CPUS
  local cpus=$1
  if multi; then
    local mem=$(($(mem_mb) / NODES))
    echo "NodeName=sw[1-$NODES] NodeHostname=$NODE NodeAddr=127.0.0.1 Port=[17001-$((17000 + NODES))] CPUs=$cpus RealMemory=$mem State=UNKNOWN"
  else
    echo "NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$(mem_mb) Gres=gpu:$FAKE_GPUS State=UNKNOWN"
  fi
}

write_configs() { # MODE
  local mode=$1 cpus
  cpus=$(nproc)
  mkdir -p "$ETC" "$LOGDIR" "$RUN" /var/spool/slurmctld /var/spool/slurmd
  cat > "$ETC/slurm.conf" <<CONF
$MARKER
# Mode: $mode.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
$(common_slurm_conf)
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd$(multi && echo /%n)
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd$(multi && echo -%n).pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd$(multi && echo -%n).log
# Slurm's mail through the shipped MailProg wrapper, to a stand-in mailer that keeps each mail
# in $MAIL_DIR (settings and the tests' faults in $ETC/slurmwatch-mail.conf; tests/cluster/mail.rs).
MailProg=$ETC/slurmwatch-mail.sh
$(tracking_lines "$mode")
AccountingStorageHost=127.0.0.1
PlugStackConfig=$ETC/plugstack.conf
# Each finished job's summary into slurmdbd (AdminComment): the shipped wrapper, with its
# settings in $ETC/slurmwatch-ctld.conf. Without a node serving summaries it stores nothing.
EpilogSlurmctld=$ETC/slurmctld-epilog.sh
GresTypes=gpu
$(node_lines "$cpus")
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
# For the queued-job answers: a short partition with a low MaxTime and one restricted to an
# account (users without it may not use it).
PartitionName=short Nodes=ALL MaxTime=00:10:00 State=UP
PartitionName=restricted Nodes=ALL MaxTime=INFINITE AllowAccounts=research State=UP
CONF
  if multi; then
    : > "$ETC/gres.conf" # the virtual nodes have no cards
  else
    ensure_gpu_devices "$FAKE_GPUS"
    echo "Name=gpu File=/dev/nvidia[0-$((FAKE_GPUS - 1))]" > "$ETC/gres.conf"
  fi
  write_cgroup_conf "$ETC/cgroup.conf"
  write_slurmdbd_conf "$ETC/slurmdbd.conf" localhost 127.0.0.1 "$RUN" "$LOGDIR"
  install -m 0755 "$REPO/contrib/slurmctld-epilog.sh" "$ETC/slurmctld-epilog.sh"
  # A site's 60 s. Most tests' jobs end with no endpoint on the port: refused, not asked
  # again (asking for the bound held every such job COMPLETING 40 s and tripled the tier).
  cat > "$ETC/slurmwatch-ctld.conf" <<CONF
SLURMWATCH_BIN=$REPO/target/release/slurmwatch
SLURMWATCH_SUMMARY_URL='http://127.0.0.1:$CTLD_SUMMARY_PORT/jobs/{job}/summary'
SLURMWATCH_TIMEOUT=60
SLURMWATCH_LOG=$LOGDIR/ctld-epilog.log
CONF
  write_mail_configs
}

# The MailProg wrapper, its settings, and what the settings point at: a mailer that keeps each
# mail (its arguments one per line, a blank line, then the body) as one file in $MAIL_DIR, and
# a crashing and a hanging stand-in for the report. The faults are chosen by the job's name in
# Slurm's subject (the wrapper's arguments are the sourced file's positional parameters).
write_mail_configs() {
  install -m 0755 "$REPO/contrib/slurmwatch-mail.sh" "$ETC/slurmwatch-mail.sh"
  install -d -m 0755 "$MAIL_DIR"
  cat > "$ETC/slurmwatch-mail.conf" <<CONF
$MARKER
SLURMWATCH_MAILER=$ETC/test-mailer.sh
SLURMWATCH_BIN=$REPO/target/release/slurmwatch
SLURMWATCH_MAIL_TIMEOUT=20
case "\$*" in
  *" Name=swmail-fail "*) export SLURMWATCH_SITE_FILE=/nonexistent/site.toml ;; # report exits 2
  *" Name=swmail-crash "*) SLURMWATCH_REPORT_BIN=$ETC/test-report-crash.sh ;;
  *" Name=swmail-hang "*) SLURMWATCH_REPORT_BIN=$ETC/test-report-hang.sh SLURMWATCH_MAIL_TIMEOUT=3 SLURMWATCH_MAIL_SACCT_WAIT=0 ;;
  *" Name=swmail-nobin "*) SLURMWATCH_BIN=/nonexistent/slurmwatch ;;
  *" Name=swmail-site "*) export SLURMWATCH_SITE_FILE=$ETC/test-site.toml ;;
  *" Name=swmail-nospool"*) SLURMWATCH_REPORT_BIN=$ETC/test-report-nospool.sh ;;
esac
CONF
  # A site file for the mail of one test job: a threshold that says walltime_slack for a
  # short limit, and a note with a link under it.
  cat > "$ETC/test-site.toml" <<CONF
$MARKER
[thresholds]
walltime_slack_min_limit_seconds = 0

[notes.walltime_slack]
text = "Shorter limits start sooner on this cluster."
url = "https://hpc.example.org/docs/walltime"
CONF
  cat > "$ETC/test-mailer.sh" <<'MAILER'
#!/bin/sh
# The test cluster's mailer: keeps the mail for tests/cluster/mail.rs (written, then renamed).
MAILER
  cat >> "$ETC/test-mailer.sh" <<MAILER
d=$MAIL_DIR
MAILER
  cat >> "$ETC/test-mailer.sh" <<'MAILER'
# A mail server that refuses (tests/cluster/mail.rs): mails of `swmail-nospool-lost` jobs
# while $d/.refuse exists.
case "$*" in *" Name=swmail-nospool-lost "*) [ -e "$d/.refuse" ] && exit 75 ;; esac
f=$d/.$$.tmp
{ for a in "$@"; do printf '%s\n' "$a"; done; echo; cat; } >"$f" && mv "$f" "$d/$(date +%s%N).$$.mail"
MAILER
  printf '#!/bin/sh
# A report that crashes (tests/cluster/mail.rs).
echo partial
kill -SEGV $$
' >"$ETC/test-report-crash.sh"
  printf '#!/bin/sh
# A report that never ends (tests/cluster/mail.rs).
echo partial
exec sleep 600
' >"$ETC/test-report-hang.sh"
  # The report as on a controller without a spool (a real site's): the job's file is out of
  # its reach, so only what slurmdbd holds can be in the mail.
  printf '#!/bin/sh
# The report with no spool in reach (tests/cluster/mail.rs).
exec %s "$@" --spool /nonexistent/slurmwatch-spool
' "$REPO/target/release/slurmwatch" >"$ETC/test-report-nospool.sh"
  chmod 0755 "$ETC/test-mailer.sh" "$ETC/test-report-crash.sh" "$ETC/test-report-hang.sh" "$ETC/test-report-nospool.sh"
}

install_plugin() { # SO ARGS...
  local so=$1; shift
  [ -f "$so" ] || die "plugin $so not found: build it with 'cargo build --release -p slurmwatch-plugin'"
  install -d -m 0755 "$PLUGIN_DIR"
  # Copy then rename: a running slurmstepd keeps its mapping of the old file.
  cp "$so" "$PLUGIN_DIR/.slurmwatch.so.new"
  chmod 0755 "$PLUGIN_DIR/.slurmwatch.so.new"
  mv -f "$PLUGIN_DIR/.slurmwatch.so.new" "$PLUGIN_DIR/slurmwatch.so"
  install -d -m 0755 -o root -g root "$SPOOL"
  # The line sits behind a relative include, as a package installs it: every reader
  # (slurmstepd, the CLI, doctor) must follow it.
  install -d -m 0755 "$ETC/plugstack.conf.d"
  printf '%s\n' "$MARKER" "include plugstack.conf.d/*.conf" > "$ETC/plugstack.conf"
  echo "optional $PLUGIN_DIR/slurmwatch.so spool=$SPOOL $*" > "$ETC/$LINE_FILE"
}

start_slurm() {
  if ! sacctmgr -n list cluster >/dev/null 2>&1; then
    /usr/sbin/slurmdbd
    wait_for slurmdbd "$LOGDIR/slurmdbd.log" 60 sacctmgr -n list cluster
  fi
  add_accounts "$CLUSTER"
  /usr/sbin/slurmctld
  wait_for slurmctld "$LOGDIR/slurmctld.log" 60 scontrol ping
  local n
  for n in $(node_names); do
    if multi; then
      mkdir -p "/var/spool/slurmd/$n"
      /usr/sbin/slurmd -N "$n"
    else
      /usr/sbin/slurmd
    fi
  done
  for n in $(node_names); do
    local lf="$LOGDIR/slurmd.log"
    multi && lf="$LOGDIR/slurmd-$n.log"
    wait_for "slurmd ($n)" "$lf" 60 sh -c "sinfo -h -N -o %T -n $n | grep -Eq '^(idle|mixed|allocated)'"
  done
}

stop_slurm() {
  local f
  for f in "$RUN"/slurmd*.pid; do [ -e "$f" ] && stop_pidfile slurmd "$f"; done
  stop_pidfile slurmctld "$RUN/slurmctld.pid"
  # Leftover step daemons of killed jobs would hold the old plugin and config.
  pkill -9 -x slurmstepd 2>/dev/null || true
}

cmd=${1:-}
case "$cmd" in up|down|wipe|reinstall) ensure_ours "$ETC" ;; esac
case "$cmd" in
  up)
    mode=${2:-cgroup}
    case "$mode" in cgroup|proc) ;; *) die "mode must be cgroup or proc, not '$mode'";; esac
    so=${3:-target/release/libslurmwatch.so}
    shift $(( $# >= 3 ? 3 : $# ))
    [ "$(id -u)" = 0 ] || die "run as root (it writes /etc/slurm and starts daemons)"
    ensure_users
    stop_slurm
    write_configs "$mode"
    install_plugin "$so" "$@"
    start_munge
    start_mariadb
    start_slurm
    # A test cluster starts empty: jobs left queued by an earlier run (a held job, a future
    # begin time) would sit ahead of new ones and change their pending reasons.
    for u in root "${TEST_USERS[@]}"; do scancel -u "$u" 2>/dev/null || true; done
    echo "$mode" > "$RUN/mode"
    echo "$NODES" > "$RUN/nodes"
    log "up in $mode mode: $(sinfo -h -o '%P %D %T' | head -1)"
    ;;
  down)
    stop_slurm
    stop_pidfile slurmdbd "$RUN/slurmdbd.pid"
    stop_mariadb_and_munge
    rm -f "$RUN/mode" "$RUN/nodes"
    log "down"
    ;;
  wipe)
    "$0" down
    rm -rf /var/spool/slurmctld/* /var/spool/slurmd/* "$SPOOL"
    if [ -d /var/lib/mysql/slurm_acct_db ]; then
      start_mariadb; mariadb -e "DROP DATABASE IF EXISTS slurm_acct_db"
      stop_pidfile mariadbd /run/mysqld/mysqld.pid
    fi
    log "wiped"
    ;;
  reinstall)
    # Replace the plugin .so only (running steps keep their mapping; new steps load the new
    # file); plugstack.conf and the daemons stay as they are.
    so=${2:-target/release/libslurmwatch.so}
    [ -f "$so" ] || die "plugin $so not found"
    cp "$so" "$PLUGIN_DIR/.slurmwatch.so.new"
    chmod 0755 "$PLUGIN_DIR/.slurmwatch.so.new"
    mv -f "$PLUGIN_DIR/.slurmwatch.so.new" "$PLUGIN_DIR/slurmwatch.so"
    log "plugin replaced from $so"
    ;;
  mode) cat "$RUN/mode" 2>/dev/null || echo down ;;
  *) die "usage: $0 up [cgroup|proc] [PLUGIN.so] [args...] | down | wipe | mode" ;;
esac
