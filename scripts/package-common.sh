# Sourced by package-deb.sh and package-rpm.sh: builds what a package of RELEASE holds and sets
# plugin_so (the plugin built against that release's headers) and version_h (its
# slurm_version.h). No RELEASE: the host's Slurm, from the host's headers.
# dbd_comment: the slurmwatch-dbd-comment built against that release's library (the host's, or
# the suite's libslurm<N>t64 that scripts/vm/plugin.sh fetches); libslurm_soname and
# libslurm_deb: the library it links and the Debian package that holds it, which the packages
# require.
#   package_build [RELEASE]
package_build() {
  release=${1:-}
  dbd_comment=
  if [ -n "$release" ]; then
    . scripts/vm/common.sh
    release=$(release_of "$release")
    # It builds the whole set (scripts/cargo-release.sh), the plugin and
    # slurmwatch-dbd-comment against the release.
    scripts/vm/plugin.sh "$release"
    plugin_so=$CARGO_TARGET_DIR/slurm-$release/libslurmwatch.so
    dbd_comment=$CARGO_TARGET_DIR/slurm-$release/slurmwatch-dbd-comment
    libslurm_deb=$(basename "$(ls "$CARGO_TARGET_DIR/slurm-$release"/libslurm*.deb | head -1)")
    libslurm_deb=${libslurm_deb%%_*}
    version_h=$VM_CACHE/headers-$(suite_of "$release")/root/usr/include/slurm/slurm_version.h
  else
    scripts/cargo-release.sh
    dbd_comment=$CARGO_TARGET_DIR/release/slurmwatch-dbd-comment
    plugin_so=$CARGO_TARGET_DIR/release/libslurmwatch.so
    version_h=${SLURM_INCLUDE_DIR:-/usr/include}/slurm/slurm_version.h
  fi
  libslurm_soname=$(readelf -d "$dbd_comment" | sed -n 's/.*NEEDED.*\[\(libslurm\.so\.[0-9]*\)\].*/\1/p')
  [ -n "$libslurm_soname" ] || { echo "package: $dbd_comment links no libslurm.so.N" >&2; exit 1; }
  if [ -z "$release" ]; then
    libslurm_deb=$(dpkg -S "$libslurm_soname" 2>/dev/null | head -1 | cut -d: -f1)
    [ -n "$libslurm_deb" ] || { echo "package: no Debian package holds $libslurm_soname" >&2; exit 1; }
  fi
}
