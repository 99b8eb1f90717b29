#!/usr/bin/env bash
# Builds the plugin against one Slurm release's headers: that suite's libslurm-dev, fetched
# with `apt-get download` under a private apt configuration and unpacked with dpkg-deb -x
# (the host's own Slurm and apt state are untouched), read by plugin/build.rs through
# SLURM_INCLUDE_DIR. slurmstepd refuses a plugin built for another major.minor.
# Also slurmwatch-dbd-comment (the AdminComment's store, docs/admin.md), built against that
# release's headers and its own libslurm (the suite's libslurm<N>t64, fetched and unpacked the
# same way; its .deb is kept for the guest, which installs it as a site would from its archive).
#
#   scripts/vm/plugin.sh 24.11|26.05    → target/slurm-<release>/libslurmwatch.so,
#                                          target/slurm-<release>/slurmwatch-dbd-comment
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/vm/common.sh
release=$(release_of "${1:?usage: $0 24.11|26.05}")
suite=$(suite_of "$release")
target=${CARGO_TARGET_DIR:-target}
hdr=$VM_CACHE/headers-$suite

conf=$(apt_private "$suite")
version=$(APT_CONFIG=$conf apt-cache show --no-all-versions libslurm-dev | sed -n 's/^Version: //p' | head -1)
[ -n "$version" ] || vdie "no libslurm-dev in $suite"
# libslurm-dev depends on exactly one library package of its own version (libslurm42t64 …).
lib_pkg=$(APT_CONFIG=$conf apt-cache show --no-all-versions libslurm-dev |
  sed -n 's/^Depends:.*\(libslurm[0-9][0-9a-z]*\) (= [^)]*).*/\1/p' | head -1)
[ -n "$lib_pkg" ] || vdie "libslurm-dev $version in $suite names no libslurm library package"
if [ "$(cat "$hdr/version" 2>/dev/null)" != "$version" ] || ! ls "$hdr"/deb/"${lib_pkg}"_*.deb >/dev/null 2>&1; then
  vlog "fetching libslurm-dev and $lib_pkg $version ($suite)"
  rm -rf "$hdr" && mkdir -p "$hdr/deb"
  chmod 0755 "$hdr" "$hdr/deb"; chown _apt "$hdr/deb" 2>/dev/null || true
  (cd "$hdr/deb" && APT_CONFIG=$conf apt-get download -qq "libslurm-dev=$version" "$lib_pkg=$version")
  dpkg-deb -x "$hdr"/deb/libslurm-dev_*.deb "$hdr/root"
  dpkg-deb -x "$hdr"/deb/"${lib_pkg}"_*.deb "$hdr/root"
  echo "$version" > "$hdr/version"
fi
hex=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]*\)/\1/p' "$hdr/root/usr/include/slurm/slurm_version.h")
[ -n "$hex" ] || vdie "no SLURM_VERSION_NUMBER in $hdr"
got=$((16#${hex:0:2})).$(printf %02d $((16#${hex:2:2}))).$((16#${hex:4:2}))
case "$got" in "$release".*) ;; *) vdie "headers say Slurm '$got', expected $release.x" ;; esac

# The one build directory and the one set of crates (scripts/cargo-release.sh): dependencies
# compile once for the host's build and every release's. The build scripts rerun when
# SLURM_INCLUDE_DIR or SLURM_LIB_DIR change, so only the plugin and slurmwatch-dbd-comment are
# rebuilt, against this release's headers and its own libslurm (docs/admin.md: "for another
# release build it … against that release's headers and library"). Both replace target/release's
# copies: callers that need the host's (scripts/test.sh) keep their own.
export CARGO_TARGET_DIR=$target
libdir=$(dirname "$(find "$hdr/root/usr/lib" -name libslurm.so | head -1)")
[ -e "$libdir/libslurm.so" ] || vdie "no libslurm.so unpacked under $hdr/root/usr/lib"
SLURM_INCLUDE_DIR=$hdr/root/usr/include SLURM_LIB_DIR=$libdir scripts/cargo-release.sh >&2
mkdir -p "$target/slurm-$release"
cp -f "$CARGO_TARGET_DIR/release/libslurmwatch.so" "$target/slurm-$release/libslurmwatch.so.new"
mv -f "$target/slurm-$release/libslurmwatch.so.new" "$target/slurm-$release/libslurmwatch.so"
echo "$got" > "$target/slurm-$release/slurm-version"
cp -f "$CARGO_TARGET_DIR/release/slurmwatch-dbd-comment" "$target/slurm-$release/slurmwatch-dbd-comment.new"
mv -f "$target/slurm-$release/slurmwatch-dbd-comment.new" "$target/slurm-$release/slurmwatch-dbd-comment"
rm -f "$target/slurm-$release"/libslurm*.deb
cp -f "$hdr"/deb/"${lib_pkg}"_*.deb "$target/slurm-$release/"
vlog "plugin and slurmwatch-dbd-comment for Slurm $got: $target/slurm-$release/"
