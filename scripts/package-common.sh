# Sourced by package-deb.sh and package-rpm.sh: builds what a package of RELEASE holds and sets
# plugin_so (the plugin built against that release's headers) and version_h (its
# slurm_version.h). No RELEASE: the host's Slurm, from the host's headers.
#   package_build [RELEASE]
package_build() {
  release=${1:-}
  if [ -n "$release" ]; then
    . scripts/vm/common.sh
    release=$(release_of "$release")
    scripts/vm/plugin.sh "$release"
    cargo build --release --locked -p slurmwatch-cli -p slurmwatch-quickack -p slurmwatch-epilog
    plugin_so=$CARGO_TARGET_DIR/slurm-$release/libslurmwatch.so
    version_h=$VM_CACHE/headers-$(suite_of "$release")/root/usr/include/slurm/slurm_version.h
  else
    cargo build --release --locked -p slurmwatch-plugin -p slurmwatch-cli -p slurmwatch-quickack -p slurmwatch-epilog
    plugin_so=$CARGO_TARGET_DIR/release/libslurmwatch.so
    version_h=${SLURM_INCLUDE_DIR:-/usr/include}/slurm/slurm_version.h
  fi
}
