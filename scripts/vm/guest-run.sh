#!/bin/bash
# Runs inside the guest (copied to the share as run.sh; /sbin/slurmwatch-vminit runs it as
# PID 1's child): a single-node Slurm on cgroup v2 without systemd (munged, mariadbd,
# slurmdbd, slurmctld, slurmd), the release's slurmwatch package from the share, then the
# host's Rust cluster tests the share's guest-tests.txt lists. Every wait has a timeout; on
# any failure the logs are still copied to the share and the machine powers off.
set -euo pipefail
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
S=/share
OUT=$S/out
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
up() { cut -d' ' -f1 /proc/uptime; }
stage() { echo "stage $1 $(up)" | tee -a "$OUT/stages.txt"; }
stage start
NODE=slurmvm
LOG=/var/log/slurm
mkdir -p $LOG /run/slurm /var/spool/slurmctld /var/spool/slurmd /var/spool/slurmwatch

collect_logs() {
  cp -f $LOG/*.log /var/log/mysql/*.log "$OUT/" 2>/dev/null || true
  cp -f /etc/slurm/slurm.conf /etc/slurm/cgroup.conf "$OUT/" 2>/dev/null || true
}
trap collect_logs EXIT

wait_for() { # NAME LOG TIMEOUT_S COMMAND...
  local name=$1 logf=$2 t=$3; shift 3
  local end=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then
      echo "guest: $name not ready after ${t}s; last lines of $logf:"
      tail -n 30 "$logf" 2>/dev/null || true
      echo "FATAL $name" > "$OUT/fatal.txt"
      exit 1
    fi
    sleep 0.3
  done
}

# This release's own package (scripts/package-deb.sh RELEASE): the plugin in Slurm's plugin
# directory, slurmwatch, slurmwatch-epilog and slurmwatch-dbd-comment (docs/admin.md, "Every
# job's summary in slurmdbd"); its Depends pins the Slurm major.minor and names the release's
# libslurm package, which comes from the suite's archive (the guest has no network: the share).
if ! dpkg -i $S/libslurm*.deb $S/slurmwatch_*.deb > $OUT/package-install.log 2>&1; then
  echo "FATAL dpkg -i slurmwatch" > "$OUT/fatal.txt"
  cat $OUT/package-install.log
  exit 1
fi
dpkg-query -W -f='${Version}\n' slurmwatch > $OUT/package.txt
# comment-store "sacctmgr": a site without slurmwatch-dbd-comment (built from source without
# it): ctld-epilog stores through this release's sacctmgr, which keeps the value's case.
if [ "$(cat $S/comment-store 2>/dev/null)" = sacctmgr ]; then
  rm -f /usr/bin/slurmwatch-dbd-comment
fi
PLUGIN=/usr/lib/$(uname -m)-linux-gnu/slurm-wlm/slurmwatch.so
install -d -m 0755 /usr/local/bin
install -m 0755 $S/slurmwatch /usr/local/bin/slurmwatch
install -D -m 0644 $S/libslurmwatch_quickack.so /usr/local/lib/slurmwatch/libslurmwatch_quickack.so

cpus=$(nproc)
mem=$(awk '/MemTotal/ {printf "%d", $2/1024*0.85}' /proc/meminfo)
mkdir -p /etc/slurm
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=swvm
SlurmctldHost=$NODE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
SlurmdDebug=info
SlurmctldDebug=info
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
JobAcctGatherType=jobacct_gather/cgroup
PrologFlags=Contain
JobAcctGatherFrequency=task=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$NODE
JobCompType=jobcomp/none
KillWait=5
MinJobAge=300
InactiveLimit=0
Waittime=0
PlugStackConfig=/etc/slurm/plugstack.conf
EpilogSlurmctld=/usr/share/slurmwatch/slurmctld-epilog.sh
NodeName=$NODE CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes=ALL MaxTime=00:10:00 State=UP
PartitionName=restricted Nodes=ALL MaxTime=INFINITE AllowAccounts=research State=UP
CONF
# No systemd: slurmd creates <node>_slurmstepd.scope itself.
cat > /etc/slurm/cgroup.conf <<CONF
CgroupPlugin=cgroup/v2
IgnoreSystemd=yes
ConstrainCores=yes
ConstrainRAMSpace=yes
CONF
cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=$NODE
SlurmUser=root
PidFile=/run/slurm/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=root
CONF
chmod 600 /etc/slurm/slurmdbd.conf
# As on a site and on the host's test cluster: the line behind the include, in the file the
# cluster tests' harness rewrites (tests/harness PLUGSTACK_LINE_FILE).
echo "include /etc/slurm/plugstack.conf.d/*.conf" > /etc/slurm/plugstack.conf
echo "optional $PLUGIN spool=/var/spool/slurmwatch" > /etc/slurm/plugstack.conf.d/00-test-cluster.conf
# The packaged EpilogSlurmctld's settings (no syslog in the guest: a log file, collected below).
echo "SLURMWATCH_LOG=$LOG/ctld-epilog.log" > /etc/slurm/slurmwatch-ctld.conf

# munge
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
runuser -u munge -- /usr/sbin/munged --force
wait_for munged /var/log/munge/munged.log 30 sh -c 'munge -n | unmunge'
stage munged

# MariaDB (bookworm's 10.11, see image.sh); root authenticates by the socket's uid. Both
# socket paths: sid's client library looks for /run/mariadbd/mysqld.sock.
install -d -o mysql -g mysql /run/mysqld /run/mariadbd /var/log/mysql
ldd /usr/sbin/mariadbd | grep "not found" || true
ln -sf /run/mysqld/mysqld.sock /run/mariadbd/mariadbd.sock
ln -sf /run/mysqld/mysqld.sock /run/mariadbd/mysqld.sock
setsid /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --skip-networking \
  --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid \
  --innodb-buffer-pool-size=128M --log-error=/var/log/mysql/mariadb.log </dev/null >$LOG/mariadbd-stderr.log 2>&1 &
wait_for mariadbd /var/log/mysql/mariadb.log 120 mariadb --socket=/run/mysqld/mysqld.sock -e "select 1"
mariadb --version > "$OUT/mariadb-version.txt" 2>&1 || true
stage mariadb

/usr/sbin/slurmdbd
wait_for slurmdbd $LOG/slurmdbd.log 120 sacctmgr -n list cluster
stage slurmdbd
sacctmgr -i add cluster swvm >/dev/null
sacctmgr -i add account research cluster=swvm >/dev/null
sacctmgr -i add account general cluster=swvm >/dev/null
for u in root swuser1 swuser2; do sacctmgr -i add user $u account=general cluster=swvm >/dev/null; done
sacctmgr -i add user swuser1 account=research cluster=swvm >/dev/null

# "The node service": the packaged unit's command line with its settings (node.conf), as
# systemd would run it (no systemd here); the controller asks it for each job's summary.
(
  set -a
  eval "$(sed -n 's/^Environment=//p' /lib/systemd/system/slurmwatch-node.service)"
  # shellcheck source=/dev/null
  . /etc/slurmwatch/node.conf
  set +a
  eval "exec setsid $(sed -n 's/^ExecStart=//p' /lib/systemd/system/slurmwatch-node.service)"
) </dev/null >$LOG/slurmwatch-node.log 2>&1 &
wait_for slurmwatch-node $LOG/slurmwatch-node.log 30 bash -c "exec 3<>/dev/tcp/$NODE/9944"

/usr/sbin/slurmctld
wait_for slurmctld $LOG/slurmctld.log 120 scontrol ping
/usr/sbin/slurmd
wait_for slurmd $LOG/slurmd.log 120 sh -c "sinfo -h -N -o %T -n $NODE | grep -Eq '^(idle|mixed|allocated)'"
stage slurm_up
sinfo -V > "$OUT/slurm-version.txt"

# The host's Rust cluster tests (tests/cluster), the ones scripts/vm/guest-tests.txt lists:
# the same expectations as on the host's 22.05 cluster, against this release. The harness
# reads the tracking mode and node count as scripts/cluster.sh leaves them, and the marker of
# a guest for its Phase::Guest tests.
echo cgroup > /run/slurm/mode
echo 1 > /run/slurm/nodes
touch /run/slurm/guest
cd /tmp
set +e
mapfile -t guest_tests < <(grep -v '^#' $S/guest-tests.txt | grep .)
SLURMWATCH_BIN=/usr/local/bin/slurmwatch SLURMWATCH_EPILOG_BIN=/usr/sbin/slurmwatch-epilog \
  RUST_BACKTRACE=1 timeout "${GUEST_TEST_TIMEOUT:-900}" \
  $S/cluster-tests --ignored --exact --test-threads=2 "${guest_tests[@]}" > "$OUT/cluster-tests.log" 2>&1
echo "cluster-tests exit $?" | tee "$OUT/cluster-tests-exit.txt"
set -e
# scripts/vm/boot.sh's sign that run.sh ran to the end.
stage tests_done
