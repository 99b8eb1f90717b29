# Sourced by package-deb.sh and package-rpm.sh: builds what a package of RELEASE holds and sets
# plugin_so (the plugin built against that release's headers) and version_h (its
# slurm_version.h). No RELEASE: the host's Slurm, from the host's headers.
# dbd_comment: the slurmwatch-dbd-comment built against that release's library, when there is
# one (the host's release only).
#   package_build [RELEASE]
package_build() {
  release=${1:-}
  dbd_comment=
  if [ -n "$release" ]; then
    . scripts/vm/common.sh
    release=$(release_of "$release")
    scripts/vm/plugin.sh "$release"
    cargo build --release --locked -p slurmwatch-cli -p slurmwatch-quickack -p slurmwatch-epilog
    plugin_so=$CARGO_TARGET_DIR/slurm-$release/libslurmwatch.so
    version_h=$VM_CACHE/headers-$(suite_of "$release")/root/usr/include/slurm/slurm_version.h
  else
    # slurmwatch-dbd-comment links the host's libslurm: in the host release's package only (a
    # release's own needs that release's library, which the headers alone do not bring).
    cargo build --release --locked -p slurmwatch-plugin -p slurmwatch-cli -p slurmwatch-quickack -p slurmwatch-epilog -p slurmwatch-dbd-comment
    dbd_comment=$CARGO_TARGET_DIR/release/slurmwatch-dbd-comment
    plugin_so=$CARGO_TARGET_DIR/release/libslurmwatch.so
    version_h=${SLURM_INCLUDE_DIR:-/usr/include}/slurm/slurm_version.h
  fi
}
