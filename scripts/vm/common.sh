# Shared by scripts/vm/*.sh (sourced). The VM tier: Slurm 24.11 (trixie) and 26.05 (sid) on
# cgroup v2, each in a QEMU guest built from Debian's archive (docs/design.md §9).
VM_CACHE=${VM_CACHE:-/var/cache/slurmwatch-vm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

vlog() { echo "vm: $*" >&2; }
vdie() { echo "vm: $*" >&2; exit 1; }

# RELEASE (24.11, 26.05) or suite name → suite
suite_of() {
  case "$1" in
    24.11 | trixie) echo trixie ;;
    26.05 | sid) echo sid ;;
    *) vdie "unknown Slurm release '$1' (known: 24.11 = trixie, 26.05 = sid)" ;;
  esac
}
release_of() {
  case "$(suite_of "$1")" in trixie) echo 24.11 ;; sid) echo 26.05 ;; esac
}

# A private apt configuration for SUITE under $VM_CACHE/apt-SUITE: the host's own apt state
# is never read or changed. sid's InRelease reads as expired against this machine's clock.
apt_private() { # SUITE → prints the APT_CONFIG path
  local s=$1 d=$VM_CACHE/apt-$1
  mkdir -p "$d/lists/partial" "$d/cache/archives/partial" "$d/etc"
  echo "deb [signed-by=$KEYRING] $MIRROR $s main" > "$d/etc/sources.list"
  cat > "$d/apt.conf" <<CONF
Dir::Etc::sourcelist "$d/etc/sources.list";
Dir::Etc::sourceparts "/dev/null";
Dir::State::Lists "$d/lists";
Dir::Cache "$d/cache";
Dir::State::status "/dev/null";
Acquire::Check-Valid-Until "false";
APT::Architecture "amd64";
CONF
  # Lists older than a day are refreshed.
  if [ -z "$(find "$d/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null)" ]; then
    APT_CONFIG=$d/apt.conf apt-get update -qq >&2
  fi
  echo "$d/apt.conf"
}
