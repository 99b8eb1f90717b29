#!/usr/bin/env bash
# Installs what building and testing slurmwatch needs on Debian 12, as root. Idempotent:
# packages already present are skipped, so a second run costs a second.
set -euo pipefail

PACKAGES=(
  slurmctld slurmd slurm-client slurmdbd slurm-wlm-basic-plugins libslurm-dev
  munge mariadb-server libclang-dev clang sqlite3 tmux procps rpm
  acl            # getfacl: the cluster tests check the live file's read grant
  gcc libc6-dev  # the linker and C runtime cargo's build scripts (bundled SQLite) need
  python3        # the cluster tests' jobs allocate memory with it
  python3-venv   # scripts/bench-vs-slurmpast.sh installs slurmpast into a venv
  chromium  # headless: the cluster tests render the HTML report
  prometheus  # the cluster tests scrape `slurmwatch metrics --listen` with a private instance
  iproute2 util-linux  # scripts/site.sh: the site's hosts as namespaces (ip, nsenter, unshare)
  systemd curl  # the package test: systemd-analyze verify/security of the node service; curl
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Debian's postinst scripts try to start daemons; there is no systemd here, and the test
  # cluster starts them itself.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  for c in "$HOME/.cargo/bin/cargo" /usr/local/cargo/bin/cargo; do
    [ -x "$c" ] && export PATH="$(dirname "$c"):$PATH" && break
  done
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "deps: cargo not found: install a Rust toolchain >= 1.87 (rustup.rs) and run again" >&2
  exit 2
fi
