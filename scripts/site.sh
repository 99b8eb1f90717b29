#!/usr/bin/env bash
# The site topology: a controller, a login host and two compute hosts on this one machine, each
# its own Linux namespaces, running real Slurm 22.05 daemons joined only by the network and
# munge, with slurmwatch installed from the .deb and configured as docs/admin.md tells a site
# (docs/admin.md, "Test bed: the site topology", says why namespaces and not QEMU).
#
#   scripts/site.sh up                 # (root) runs scripts/cluster.sh down first, then starts it
#   scripts/site.sh down               # stops all of it (and MariaDB and munged, as cluster.sh down)
#   scripts/site.sh on HOST CMD...     # CMD on HOST (ctl, login, c1, c2), in its namespaces
#   scripts/site.sh service HOST start|stop   # a compute host's node service (the endpoint)
#   scripts/site.sh status
#
# The tier (a stage of scripts/test.sh; the tests are tests/cluster/site.rs, run on the login
# host); by hand:
#
#   scripts/package-deb.sh &&
#   cargo test --locked --test cluster --no-run &&
#   flock /tmp/slurmwatch-cluster.lock sh -c 'scripts/site.sh up &&
#     scripts/site.sh on login cargo test --locked --test cluster -- --ignored --test-threads=2 site::;
#     rc=$?; scripts/site.sh down; exit $rc'
#
# Measured 2026-12-07 on this 2-core machine (`time` of the flock line, everything already
# built, the lock free): 2 min 2 s wall (up 12 s, the 9 tests 73.7 s, down and the test
# binary's check ~35 s); 59.8 s with the first 6 tests. Building first from a tree with only the tests changed: the .deb
# ~30 s (release CLI and plugin up to date), the test binary 1.5 min from cold.
#
# Hosts (bridge swsite0, 10.77.0.0/24, names in the hosts' own /etc/hosts):
#   ctl    10.77.0.10  slurmctld, slurmdbd (the machine's MariaDB over its unix socket), the
#                      EpilogSlurmctld, MailProg (the packaged wrapper, a capturing mailer),
#                      Prometheus scraping c1 and c2
#   login  10.77.0.20  nothing but the CLI (and the plugstack line, as every submit host)
#   c1, c2 10.77.0.11, .12  one slurmd each (proctrack/cgroup, the plugin, two fake cards as
#                      GRES read through the fake NVML that the plugstack line's nvml= names),
#                      and `slurmwatch metrics --listen` run as the packaged node service runs it
# Each host has its own network namespace (a veth into the bridge), UTS namespace (hostname =
# node name) and mount namespace, in which these are bind-mounted from /var/lib/slurmwatch-site/
# hosts/HOST/: /etc/slurm, /etc/slurmwatch, /etc/hosts, /var/log/slurm, /run/slurm,
# /var/spool/slurmd, /var/spool/slurmctld, /var/lib/slurmwatch (the spool's base,
# spool=/var/lib/slurmwatch/spool/%n: present on c1 and c2 only) and /var/spool/slurmwatch
# (empty on every host: the machine's default spool belongs to the single-host cluster), and
# on c1 and c2 /tmp/slurmwatch-fake-nvml (each compute host's own fake cards' state).
# /shared (the archive, archive=/shared/slurmwatch/%u) is one directory that c1, c2 and login
# see; on ctl it is an empty mount point. Shared by all hosts, as on no real site: /usr (the
# package is installed once, `dpkg -i` on the machine), /home, /tmp (the tests' job
# directories play the site's shared home), /run/munge (the machine's one munged: one key, as
# a site has) and /run/mysqld (MariaDB, reached only by ctl's slurmdbd). Each host's /etc/slurm
# and /etc/slurmwatch start as the package's own files (extracted from the same .deb, as
# `dpkg -i` on that host would leave them) and are then edited as docs/admin.md says.
#
# Daemons are started in a host's namespaces by nsenter into its holder process (one per host,
# `nsenter --net=/run/netns/sw-HOST unshare --mount --uts --propagation private`; not `ip netns
# exec`, which remounts /sys and so hides the cgroup hierarchies slurmd needs). `down` stops
# each daemon by its PID file, then every process left in the host's network namespace.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
SELF="$REPO/scripts/site.sh"
LOG_PREFIX=site
LOGDIR=/var/log/slurm # MariaDB's log (the machine's, as scripts/cluster.sh)
# shellcheck source=scripts/slurm-common.sh
. "$REPO/scripts/slurm-common.sh"

CLUSTER=swsite
HOSTS=(ctl login c1 c2)
COMPUTE=(c1 c2)
NET=10.77.0
BRIDGE=swsite0
# Where each host's own directories live, and what this script keeps while the site is up
# (the holders' PIDs; `up`, the marker tests/harness's Phase::Site looks for).
SITE=/var/lib/slurmwatch-site
STATE=/run/slurmwatch-site
PLUGIN=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)/slurm-wlm/slurmwatch.so
# The site's plugstack arguments: a spool that is not the default, per node, and an archive
# on the shared directory.
SPOOL_TEMPLATE=/var/lib/slurmwatch/spool/%n
ARCHIVE_TEMPLATE=/shared/slurmwatch/%u
SUMMARY_PORT=9944
PROM_PORT=9090
# Two cards per compute host as count-style GRES, read through the fake NVML (tests/fake-nvml,
# built by scripts/test.sh) that the plugstack line's documented nvml= names. Each compute
# host has its own fake-card state (FAKE_NVML_DIR bind-mounted from its directory), so c1's
# and c2's cards differ as on a site.
SITE_GPUS=2
FAKE_NVML=/usr/local/lib/slurmwatch/test/libnvidia-ml.so.1
FAKE_NVML_DIR=/tmp/slurmwatch-fake-nvml

addr() { # HOST
  case $1 in
    ctl) echo "$NET.10" ;;
    login) echo "$NET.20" ;;
    c1) echo "$NET.11" ;;
    c2) echo "$NET.12" ;;
    *) die "no host '$1' (hosts: ${HOSTS[*]})" ;;
  esac
}
dir_of() { echo "$SITE/hosts/$1"; }
holder_pid() { # HOST: the PID of the host's holder, when it is alive
  local p
  p=$(cat "$STATE/$1.pid" 2>/dev/null) || return 1
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && [ -e "/proc/$p/ns/mnt" ] || return 1
  echo "$p"
}
is_compute() { case " ${COMPUTE[*]} " in *" $1 "*) return 0 ;; esac; return 1; }

# CMD in HOST's namespaces (network, mount, UTS), in the caller's working directory.
on() { # HOST CMD...
  local h=$1 pid
  shift
  addr "$h" >/dev/null
  pid=$(holder_pid "$h") || die "host $h is not up: scripts/site.sh up"
  exec nsenter -t "$pid" -n -m -u --wd="$PWD" -- "$@"
}
# The same without replacing this shell.
in_host() { # HOST CMD...
  "$SELF" on "$@"
}

# --- configuration, as docs/admin.md tells a site -----------------------------------------

# The newest .deb of this tree (scripts/package-deb.sh builds it when there is none).
find_deb() {
  local deb debs
  # (package-deb.sh leaves one: it removes the older ones.)
  debs=("$REPO"/target/debian/slurmwatch_*.deb)
  deb=${debs[0]}
  if [ ! -e "$deb" ]; then
    log "no .deb in target/debian: building it (scripts/package-deb.sh)"
    deb=$("$REPO/scripts/package-deb.sh" | tail -n 1)
  fi
  echo "$deb"
}

# docs/admin.md, "Install": the package on the machine (/usr is every host's); it carries
# slurmwatch-dbd-comment next to slurmwatch, where the controller's ctld-epilog looks.
install_package() { # DEB
  local deb=$1
  install -d "$STATE"
  if ! dpkg-query -W -f='${Status}' slurmwatch 2>/dev/null | grep -q 'ok installed'; then
    touch "$STATE/package-installed-here"
  fi
  log "installing $(basename "$deb") (dpkg -i on the machine: /usr is shared by all hosts)"
  dpkg -i --force-confdef --force-confold "$deb" >/dev/null
  [ -x /usr/bin/slurmwatch-dbd-comment ] || die "the package carries no slurmwatch-dbd-comment"
}

slurm_conf() {
  local cpus mem
  cpus=$(nproc)
  mem=$(($(mem_mb) / ${#COMPUTE[@]}))
  cat <<CONF
$MARKER
# The site topology (scripts/site.sh): the same file on every host.
ClusterName=$CLUSTER
SlurmctldHost=ctl($(addr ctl))
$(common_slurm_conf)
$(tracking_lines cgroup)
AccountingStorageHost=ctl
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
# docs/admin.md: the packaged MailProg wrapper and EpilogSlurmctld.
MailProg=/usr/share/slurmwatch/slurmwatch-mail.sh
EpilogSlurmctld=/usr/share/slurmwatch/slurmctld-epilog.sh
GresTypes=gpu
NodeName=c1 NodeAddr=$(addr c1) CPUs=$cpus RealMemory=$mem Gres=gpu:$SITE_GPUS State=UNKNOWN
NodeName=c2 NodeAddr=$(addr c2) CPUs=$cpus RealMemory=$mem Gres=gpu:$SITE_GPUS State=UNKNOWN
PartitionName=debug Nodes=c[1-2] Default=YES MaxTime=INFINITE State=UP
CONF
}

# Each host's /etc/slurm and /etc/slurmwatch: the package's files (from DEB), then the site's.
write_host_configs() { # DEB
  local deb=$1 pkg h d
  pkg=$(mktemp -d)
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$pkg" ./etc
  {
    echo "127.0.0.1 localhost"
    for h in "${HOSTS[@]}"; do echo "$(addr "$h") $h"; done
  } > "$SITE/hosts.txt"
  for h in "${HOSTS[@]}"; do
    d=$(dir_of "$h")
    rm -rf "$d/etc-slurm" "$d/etc-slurmwatch"
    cp -a "$pkg/etc/slurm" "$d/etc-slurm"
    cp -a "$pkg/etc/slurmwatch" "$d/etc-slurmwatch"
    slurm_conf > "$d/etc-slurm/slurm.conf"
    write_cgroup_conf "$d/etc-slurm/cgroup.conf"
    if is_compute "$h"; then
      echo "Name=gpu File=/dev/nvidia[0-$((SITE_GPUS - 1))]" > "$d/etc-slurm/gres.conf"
    else
      : > "$d/etc-slurm/gres.conf"
    fi
    # "Enable": plugstack.conf includes the package's file, whose line is uncommented with the
    # site's arguments (the same file on submit hosts, so sbatch knows --slurmwatch).
    printf '%s\n' "$MARKER" "include /etc/slurm/plugstack.conf.d/*.conf" > "$d/etc-slurm/plugstack.conf"
    sed -i "s|^#optional $PLUGIN .*|optional $PLUGIN default=off spool=$SPOOL_TEMPLATE archive=$ARCHIVE_TEMPLATE nvml=$FAKE_NVML|" \
      "$d/etc-slurm/plugstack.conf.d/slurmwatch.conf"
    grep -q "^optional $PLUGIN " "$d/etc-slurm/plugstack.conf.d/slurmwatch.conf" ||
      die "the package's plugstack.conf.d/slurmwatch.conf has no commented line for $PLUGIN"
    # The site file: where the controller asks a node for a job's summary.
    cat > "$d/etc-slurmwatch/site.toml" <<CONF
# The site topology's site file (scripts/site.sh).
[summary]
url = "http://{node}:$SUMMARY_PORT/jobs/{job}/summary"
timeout_seconds = 60
CONF
    if is_compute "$h"; then
      # "The node service": node.conf names the Prometheus server allowed to read /metrics.
      sed -i "s|^SLURMWATCH_METRICS_ARGS=.*|SLURMWATCH_METRICS_ARGS=\"--metrics-allow $(addr ctl)\"|" \
        "$d/etc-slurmwatch/node.conf"
      # A spool elsewhere than the package's: its base, root's (the plugin makes the %n level).
      install -d -m 0755 "$d/lib-slurmwatch/spool"
    fi
  done
  rm -rf "$pkg"
  d=$(dir_of ctl)
  write_slurmdbd_conf "$d/etc-slurm/slurmdbd.conf" ctl "$(addr ctl)" /run/slurm /var/log/slurm
  # "The report in the end-of-job mail" and "Every job's summary in slurmdbd": the wrappers'
  # settings. The mailer keeps each mail (its arguments, a blank line, the body) in
  # /var/log/slurm/mail on ctl.
  cat > "$d/etc-slurm/slurmwatch-ctld.conf" <<CONF
SLURMWATCH_LOG=/var/log/slurm/ctld-epilog.log
CONF
  cat > "$d/etc-slurm/slurmwatch-mail.conf" <<CONF
SLURMWATCH_MAILER=/etc/slurm/site-mailer.sh
CONF
  cat > "$d/etc-slurm/site-mailer.sh" <<'MAILER'
#!/bin/sh
# The site topology's mailer (ctl): keeps each mail in /var/log/slurm/mail (written, then renamed).
d=/var/log/slurm/mail
f=$d/.$$.tmp
{ for a in "$@"; do printf '%s\n' "$a"; done; echo; cat; } >"$f" && mv "$f" "$d/$(date +%s%N).$$.mail"
MAILER
  chmod 0755 "$d/etc-slurm/site-mailer.sh"
  install -d -m 0755 "$d/log/mail"
  # Prometheus on ctl scrapes every compute host's endpoint.
  install -d "$d/prometheus"
  rm -rf "$d/prometheus/data"
  {
    printf 'global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\n  evaluation_interval: 2s\n'
    printf 'scrape_configs:\n  - job_name: slurmwatch\n    honor_labels: true\n    static_configs:\n'
    printf "      - targets: ['c1:%s', 'c2:%s']\n" "$SUMMARY_PORT" "$SUMMARY_PORT"
  } > "$d/prometheus/prometheus.yml"
}

make_host_dirs() {
  local h d
  for h in "${HOSTS[@]}"; do
    d=$(dir_of "$h")
    # Logs and run files start empty; slurmctld's state, the spools and the archive stay, so
    # job ids keep counting up against slurmdbd's records of earlier runs.
    rm -rf "$d/log" "$d/run"
    install -d -m 0755 "$d/log" "$d/run" "$d/spool-slurmd" "$d/spool-slurmctld" "$d/empty" "$d/lib-slurmwatch"
    if is_compute "$h"; then install -d -m 0755 "$d/fake-nvml"; fi
  done
  install -d -m 0755 "$SITE/shared"
  install -d -m 1777 "$SITE/shared/slurmwatch"
  # The mount points, on the machine (empty there).
  install -d /etc/slurmwatch /var/lib/slurmwatch /shared /var/spool/slurmctld /var/spool/slurmd \
    /var/spool/slurmwatch /run/slurm /var/log/slurm "$FAKE_NVML_DIR"
  ensure_gpu_devices "$SITE_GPUS"
  local built=${CARGO_TARGET_DIR:-$REPO/target}/release/libfake_nvml.so
  [ -e "$built" ] || die "the fake NVML is not built: cargo build --release -p fake-nvml"
  install -D -m 0755 "$built" "$FAKE_NVML"
}

# --- the namespaces ------------------------------------------------------------------------

net_up() {
  local h
  ip link add "$BRIDGE" type bridge
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for h in "${HOSTS[@]}"; do
    ip netns add "sw-$h"
    ip link add "swv-$h" type veth peer name eth0 netns "sw-$h"
    ip link set "swv-$h" master "$BRIDGE" up
    ip -n "sw-$h" addr add "$(addr "$h")/24" dev eth0
    ip -n "sw-$h" link set eth0 up
    ip -n "sw-$h" link set lo up
  done
}

# Run by the holder, inside its new mount and UTS namespaces: the host's own view, then sleep.
holder() { # HOST
  local h=$1 d
  d=$(dir_of "$h")
  hostname "$h"
  b() { mount --bind "$1" "$2"; }
  b "$d/etc-slurm" /etc/slurm
  b "$d/etc-slurmwatch" /etc/slurmwatch
  b "$SITE/hosts.txt" /etc/hosts
  b "$d/log" /var/log/slurm
  b "$d/run" /run/slurm
  b "$d/spool-slurmd" /var/spool/slurmd
  b "$d/spool-slurmctld" /var/spool/slurmctld
  b "$d/empty" /var/spool/slurmwatch
  b "$d/lib-slurmwatch" /var/lib/slurmwatch
  [ "$h" = ctl ] || b "$SITE/shared" /shared
  if is_compute "$h"; then b "$d/fake-nvml" "$FAKE_NVML_DIR"; fi
  echo $$ > "$STATE/$h.pid.new"
  mv "$STATE/$h.pid.new" "$STATE/$h.pid"
  exec sleep infinity
}

start_holders() {
  local h
  install -d "$STATE"
  for h in "${HOSTS[@]}"; do
    rm -f "$STATE/$h.pid"
    setsid nsenter --net="/run/netns/sw-$h" -- unshare --mount --uts --propagation private -- \
      "$SELF" _holder "$h" </dev/null >>"$(dir_of "$h")/log/holder.log" 2>&1 &
  done
  for h in "${HOSTS[@]}"; do
    wait_for "host $h" "$(dir_of "$h")/log/holder.log" 20 holder_pid "$h"
  done
}

# --- daemons ------------------------------------------------------------------------------

# HOST's node service: the ExecStart of the packaged unit with its settings (the unit's
# Environment=, then /etc/slurmwatch/node.conf), as systemd would run it, without its sandbox
# (no systemd in these namespaces).
start_node_service() { # HOST
  local h=$1 d unit=/lib/systemd/system/slurmwatch-node.service
  d=$(dir_of "$h")
  grep -q '^ExecStart=' "$unit" || die "$unit has no ExecStart"
  # shellcheck disable=SC2016 # expanded by that shell, in the host
  in_host "$h" setsid sh -c '
    set -a
    eval "$(sed -n "s/^Environment=//p" "$1")"
    . /etc/slurmwatch/node.conf
    set +a
    umask 0077
    echo $$ > /run/slurm/slurmwatch-node.pid
    eval "exec $(sed -n "s/^ExecStart=//p" "$1")"' sh "$unit" \
    </dev/null >>"$d/log/slurmwatch-node.log" 2>&1 &
  # Answers the controller's address (the one --metrics-allow names).
  wait_for "slurmwatch-node ($h)" "$d/log/slurmwatch-node.log" 30 \
    in_host ctl curl -sf -o /dev/null "http://$h:$SUMMARY_PORT/metrics"
}

stop_node_service() { # HOST
  stop_pidfile slurmwatch-node "$(dir_of "$1")/run/slurmwatch-node.pid"
}

start_daemons() {
  local d h
  d=$(dir_of ctl)
  start_munge
  start_mariadb
  in_host ctl /usr/sbin/slurmdbd
  wait_for "slurmdbd (ctl)" "$d/log/slurmdbd.log" 60 in_host ctl sacctmgr -n list cluster
  in_host ctl "$SELF" _accounts
  in_host ctl /usr/sbin/slurmctld
  wait_for "slurmctld (ctl)" "$d/log/slurmctld.log" 60 in_host login scontrol ping
  # shellcheck disable=SC2016 # expanded by that shell, in the host
  in_host ctl setsid sh -c 'echo $$ > /run/slurm/prometheus.pid; exec prometheus "$@"' sh \
    --config.file="$d/prometheus/prometheus.yml" --storage.tsdb.path="$d/prometheus/data" \
    --web.listen-address="$(addr ctl):$PROM_PORT" </dev/null >>"$d/log/prometheus.log" 2>&1 &
  for h in "${COMPUTE[@]}"; do
    in_host "$h" /usr/sbin/slurmd
  done
  for h in "${COMPUTE[@]}"; do
    wait_for "slurmd ($h)" "$(dir_of "$h")/log/slurmd.log" 60 \
      in_host login sh -c "sinfo -h -N -o %T -n $h | grep -Eq '^(idle|mixed|allocated)'"
    start_node_service "$h"
  done
  wait_for "prometheus (ctl)" "$d/log/prometheus.log" 60 \
    in_host ctl curl -sf -o /dev/null "http://$(addr ctl):$PROM_PORT/-/ready"
}

# Everything in HOST: its daemons by their PID files, then what is left in its network namespace
# (job steps, the holder).
stop_host() { # HOST
  local h=$1 d f pids
  d=$(dir_of "$h")
  for f in slurmwatch-node prometheus slurmd slurmctld slurmdbd; do
    stop_pidfile "$f" "$d/run/$f.pid"
  done
  if [ -e "/run/netns/sw-$h" ]; then
    pids=$(ip netns pids "sw-$h" || true)
    # shellcheck disable=SC2086 # a list of PIDs
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
    for _ in $(seq 1 50); do [ -z "$(ip netns pids "sw-$h" || true)" ] && break; sleep 0.1; done
    ip netns del "sw-$h"
  fi
  rm -f "$STATE/$h.pid"
}

site_down() {
  local h
  for h in c2 c1 login ctl; do stop_host "$h"; done
  ip link del "$BRIDGE" 2>/dev/null || true
  stop_mariadb_and_munge
  if [ -e "$STATE/package-installed-here" ]; then
    dpkg -r slurmwatch >/dev/null
  fi
  rm -rf "$STATE"
}

cmd=${1:-}
case "$cmd" in
  on)
    [ $# -ge 3 ] || die "usage: $0 on HOST CMD..."
    shift
    on "$@"
    ;;
  _holder) holder "$2" ;;
  _accounts) add_accounts "$CLUSTER"; exit 0 ;;
esac

[ "$(id -u)" = 0 ] || die "run as root (it makes namespaces, mounts and starts daemons)"
# The daemons started here must not inherit the caller's descriptors (a flock(1) lock).
close_inherited_fds
case "$cmd" in
  up)
    start=$SECONDS
    ensure_ours /etc/slurm
    log "stopping the single-host cluster first (scripts/cluster.sh down): the two never run at once"
    "$REPO/scripts/cluster.sh" down
    if [ -e "$STATE/up" ] || [ -e /run/netns/sw-ctl ] || ip link show "$BRIDGE" >/dev/null 2>&1; then
      log "taking down the site left up first"
      site_down
    fi
    ensure_users
    deb=$(find_deb)
    install_package "$deb"
    make_host_dirs
    write_host_configs "$deb"
    net_up
    start_holders
    start_daemons
    # A test bed starts empty: no job left queued by an earlier run.
    for u in root "${TEST_USERS[@]}"; do in_host login scancel -u "$u" 2>/dev/null || true; done
    date +%s > "$STATE/up"
    log "up in $((SECONDS - start)) s: $(in_host login sinfo -h -N -o '%N %T' | tr '\n' ' ')"
    ;;
  down)
    site_down
    log "down"
    ;;
  service)
    if [ $# -ne 3 ] || ! is_compute "$2"; then die "usage: $0 service c1|c2 start|stop"; fi
    case "$3" in
      start) start_node_service "$2" ;;
      stop) stop_node_service "$2" ;;
      *) die "usage: $0 service c1|c2 start|stop" ;;
    esac
    ;;
  status)
    for h in "${HOSTS[@]}"; do
      if p=$(holder_pid "$h"); then echo "$h $(addr "$h") up (holder $p)"; else echo "$h down"; fi
    done
    ;;
  *) die "usage: $0 up | down | on HOST CMD... | service c1|c2 start|stop | status" ;;
esac
