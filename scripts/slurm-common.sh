# Sourced by scripts/cluster.sh (one machine, one or several slurmd) and scripts/site.sh (a
# controller, a login host and compute hosts in namespaces): the pieces both test beds start
# the same way, each rule written once here. The caller sets LOG_PREFIX (its name in messages)
# and LOGDIR (where MariaDB logs) before calling these.
# shellcheck shell=bash

# The machine's accounting database and its Slurm user, shared by both test beds (each its own
# ClusterName: swtest, swsite).
DB_USER=slurm
DB_PASS=slurmwatch-test
# Unprivileged users both test beds submit as.
TEST_USERS=(swuser1 swuser2)
# The first line of every config file these scripts write; a slurm.conf without it is a real
# cluster's, and they will not overwrite it, kill its steps or wipe its state.
MARKER="# Written by slurmwatch's scripts/cluster.sh. Test cluster only."

log() { echo "${LOG_PREFIX:-slurm}: $*" >&2; }
die() { echo "${LOG_PREFIX:-slurm}: $*" >&2; exit 1; }

# The daemons started here must not inherit the caller's descriptors: a flock(1) lock held
# around the script would otherwise stay held by mariadbd for as long as it runs. (Bash reads
# the script through fd 255: that one stays.) Call it from the script's top level.
close_inherited_fds() {
  local fd
  for fd in "/proc/$$"/fd/*; do
    fd=${fd##*/}
    if [ "$fd" -gt 2 ] && [ "$fd" -lt 255 ]; then eval "exec $fd>&-"; fi
  done
}

# Refuses to act on a machine whose slurm.conf (in ETC) this script did not write.
ensure_ours() { # ETC
  local conf="$1/slurm.conf"
  [ -e "$conf" ] || return 0
  # (Earlier versions wrote the mode into the marker line: the prefix is what counts.)
  case "$(head -n 1 "$conf")" in "# Written by slurmwatch's scripts/cluster.sh"*) return 0 ;; esac
  die "$conf was not written by this script (its first line is not \"$MARKER\"): refusing to overwrite it, kill slurmstepd or wipe slurmctld's state on what looks like a real cluster. On a test machine, move it away first."
}

# Polls COMMAND until it succeeds; after TIMEOUT_S names the daemon and shows its log.
wait_for() { # NAME LOG TIMEOUT_S COMMAND...
  local name=$1 logf=$2 t=$3; shift 3
  local end=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then
      echo "${LOG_PREFIX:-slurm}: $name not ready after ${t}s; last lines of $logf:" >&2
      tail -n 20 "$logf" >&2 2>/dev/null || true
      exit 1
    fi
    sleep 0.2
  done
}

# SIGTERM to the process in PIDFILE, SIGKILL after 10 s; removes the file.
stop_pidfile() { # NAME PIDFILE
  local pidf=$2 pid
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidf"
}

# 85 % of the machine's memory, in MiB (what the slurmd of this machine may hand out).
mem_mb() { awk '/MemTotal/ {printf "%d", $2/1024*0.85}' /proc/meminfo; }

# slurm.conf's job tracking for MODE: cgroup (proctrack/cgroup + jobacct_gather/cgroup, each
# job gets a cgroup) or proc (proctrack/linuxproc + jobacct_gather/linux, no job cgroup).
tracking_lines() { # MODE
  if [ "$1" = cgroup ]; then
    echo "ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
JobAcctGatherType=jobacct_gather/cgroup
PrologFlags=Contain"
  else
    echo "ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/linux"
  fi
}

# slurm.conf's lines that do not depend on which hosts run what.
common_slurm_conf() {
  cat <<CONF
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmdDebug=info
SlurmctldDebug=info
ReturnToService=2
SchedulerType=sched/backfill
# Backfill every 5 s, not Slurm's 30: a queued test job starts, and a pending job's expected
# start appears, within seconds (the queue tests wait for one on a node they hold alone).
SchedulerParameters=bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Jobs without --mem get 1 GiB per CPU, not the whole node, so tests can run side by side.
DefMemPerCPU=1024
JobAcctGatherFrequency=task=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
KillWait=5
MinJobAge=30
InactiveLimit=0
Waittime=0
CONF
}

write_cgroup_conf() { # FILE
  cat > "$1" <<CONF
CgroupPlugin=autodetect
ConstrainCores=yes
ConstrainRAMSpace=yes
CONF
}

# slurmdbd.conf: the machine's MariaDB over its unix socket (StorageHost=localhost).
write_slurmdbd_conf() { # FILE DBD_HOST DBD_ADDR RUN_DIR LOG_DIR
  cat > "$1" <<CONF
AuthType=auth/munge
DbdHost=$2
DbdAddr=$3
SlurmUser=root
PidFile=$4/slurmdbd.pid
LogFile=$5/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=$DB_USER
StoragePass=$DB_PASS
CONF
  chmod 600 "$1"
}

# The machine's one munged (every namespace of scripts/site.sh shares its socket).
start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
  [ -f /etc/munge/munge.key ] || mungekey --create --keyfile /etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged --force
  wait_for munged /var/log/munge/munged.log 20 sh -c 'munge -n | unmunge'
}

# The machine's MariaDB, no network: clients reach it over /run/mysqld/mysqld.sock.
start_mariadb() {
  if mariadb-admin ping >/dev/null 2>&1; then return; fi
  install -d -o mysql -g mysql /run/mysqld
  install -d "$LOGDIR"
  if [ ! -d /var/lib/mysql/mysql ]; then
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
  fi
  setsid /usr/sbin/mariadbd --user=mysql --skip-networking --socket=/run/mysqld/mysqld.sock \
    --pid-file=/run/mysqld/mysqld.pid --innodb-buffer-pool-size=256M \
    --innodb-lock-wait-timeout=900 --log-error="$LOGDIR/mariadb.log" \
    </dev/null >/dev/null 2>&1 &
  wait_for mariadbd "$LOGDIR/mariadb.log" 60 mariadb-admin ping
  mariadb -e "CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
              GRANT ALL ON slurm_acct_db.* TO '$DB_USER'@'localhost'; FLUSH PRIVILEGES;"
}

stop_mariadb_and_munge() {
  stop_pidfile mariadbd /run/mysqld/mysqld.pid
  stop_pidfile munged /run/munge/munged.pid
}

# CLUSTER's accounts and users in slurmdbd (sacctmgr reaches it through slurm.conf): root and
# the test users in `general`; swuser1 also in `research` (the partition-access tests).
add_accounts() { # CLUSTER
  local cluster=$1 u
  sacctmgr -n list cluster format=cluster | grep -qw "$cluster" || sacctmgr -i add cluster "$cluster" >/dev/null
  local a
  for a in research general; do
    sacctmgr -n list assoc cluster="$cluster" account="$a" format=account | grep -qw "$a" || sacctmgr -i add account "$a" cluster="$cluster" >/dev/null
  done
  for u in root "${TEST_USERS[@]}"; do
    sacctmgr -n list assoc cluster="$cluster" user="$u" account=general format=user | grep -qw "$u" || sacctmgr -i add user "$u" account=general cluster="$cluster" >/dev/null
  done
  sacctmgr -n list assoc cluster="$cluster" user=swuser1 account=research format=user | grep -qw swuser1 || sacctmgr -i add user swuser1 account=research cluster="$cluster" >/dev/null
}

ensure_users() {
  local u
  for u in "${TEST_USERS[@]}"; do
    id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"
  done
}

# GPUs as count-style GRES need only their device files: character devices with NVIDIA's
# major number (195), made here when the machine has no real ones (the fake NVML in
# tests/fake-nvml serves their readings).
ensure_gpu_devices() { # COUNT
  local i
  for ((i = 0; i < $1; i++)); do
    [ -e "/dev/nvidia$i" ] || mknod -m 0666 "/dev/nvidia$i" c 195 "$i"
  done
}
