#!/usr/bin/env bash
# What the VM tier needs on the host (Debian 12), as root; idempotent.
set -euo pipefail
PACKAGES=(mmdebstrap qemu-system-x86 e2fsprogs debian-archive-keyring python3)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "vm-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
