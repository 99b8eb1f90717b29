#!/usr/bin/env bash
# Builds target/debian/slurmwatch_<version>+slurm<mm>_<arch>.deb for the host's Slurm, or with
# a release argument (24.11, 26.05) target/debian-<release>/… with the plugin built against that
# release's headers (scripts/vm/plugin.sh): the plugin in Slurm's plugin
# directory, the slurmwatch, slurmwatch-epilog and slurmwatch-dbd-comment binaries (the last
# links the release's libslurm, whose package it requires), man pages, bash completion, and a
# commented plugstack.conf.d/slurmwatch.conf that is NOT active until the admin enables it.
# The package depends on the Slurm major.minor it was built against (the plugin's
# plugin_version must match slurmstepd's). Uses dpkg-deb directly: no extra tool to install.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
release=${1:-}
. scripts/package-common.sh
package_build "$release"
outdir=target/debian${release:+-$release}

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
slurm_mm=$(scripts/slurm-release.sh "$version_h")
# The package version says which Slurm the plugin is for (plugin_version must match it).
pkg_version="$version+slurm$slurm_mm"
next_mm=$(scripts/slurm-release.sh --next "$version_h")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"

install -D -m 0755 "$plugin_so" "$stage/usr/lib/$multiarch/slurm-wlm/slurmwatch.so"
install -D -m 0755 "$CARGO_TARGET_DIR/release/slurmwatch" "$stage/usr/bin/slurmwatch"
# The TCP shim the CLI preloads into sacct/sacctmgr (core/src/slurm/quickack.rs finds it here).
install -D -m 0644 "$CARGO_TARGET_DIR/release/libslurmwatch_quickack.so" "$stage/usr/lib/slurmwatch/libslurmwatch_quickack.so"
install -D -m 0755 "$CARGO_TARGET_DIR/release/slurmwatch-epilog" "$stage/usr/sbin/slurmwatch-epilog"
# The AdminComment's store through slurmdbd's API, next to slurmwatch where ctld-epilog looks.
install -D -m 0755 "$dbd_comment" "$stage/usr/bin/slurmwatch-dbd-comment"
"$CARGO_TARGET_DIR/release/slurmwatch" generate man "$stage/man"
for page in "$stage"/man/*.1; do install -D -m 0644 "$page" "$stage/usr/share/man/man1/$(basename "$page")"; done
install -D -m 0644 "$stage/man/slurmwatch-plugin.8" "$stage/usr/share/man/man8/slurmwatch-plugin.8"
rm -rf "$stage/man"
gzip -9n "$stage"/usr/share/man/man*/*
install -d "$stage/usr/share/bash-completion/completions"
"$CARGO_TARGET_DIR/release/slurmwatch" generate completions bash > "$stage/usr/share/bash-completion/completions/slurmwatch"
install -D -m 0644 README.md "$stage/usr/share/doc/slurmwatch/README.md"
# The user guide, admin guide and reference the README links to.
for doc in docs/*.md docs/reference/*.md; do install -D -m 0644 "$doc" "$stage/usr/share/doc/slurmwatch/$doc"; done
install -D -m 0644 plugstack.conf.example "$stage/usr/share/doc/slurmwatch/plugstack.conf.example"
# The EpilogSlurmctld that stores each job's summary in slurmdbd (docs/admin.md).
install -D -m 0755 contrib/slurmctld-epilog.sh "$stage/usr/share/slurmwatch/slurmctld-epilog.sh"
# The Grafana dashboard for one job, over the series `slurmwatch metrics` publishes.
install -D -m 0644 docs/grafana/slurmwatch-job.json "$stage/usr/share/slurmwatch/grafana/slurmwatch-job.json"
# The MailProg wrapper that appends the report to Slurm's end-of-job mail (docs/admin.md).
install -D -m 0755 contrib/slurmwatch-mail.sh "$stage/usr/share/slurmwatch/slurmwatch-mail.sh"
# The site file's example, every key at its default (docs/reference/site.md); not in /etc:
# without a site file the report uses the defaults.
install -D -m 0644 contrib/site.toml "$stage/usr/share/slurmwatch/site.toml.example"
install -d -m 0755 "$stage/var/spool/slurmwatch"
install -d "$stage/etc/slurm/plugstack.conf.d"
cat > "$stage/etc/slurm/plugstack.conf.d/slurmwatch.conf" <<CONF
# slurmwatch (built for Slurm $slurm_mm). Not active: remove the '#' below to enable it on
# this node, and make sure plugstack.conf has the line
#   include /etc/slurm/plugstack.conf.d/*.conf
# See slurmwatch-plugin(8) for every argument; 'slurmwatch doctor' checks the set-up.
#optional /usr/lib/$multiarch/slurm-wlm/slurmwatch.so default=off spool=/var/spool/slurmwatch
CONF
# The node service (slurmwatch metrics --listen), installed inactive, and its settings.
install -D -m 0644 contrib/slurmwatch-node.service "$stage/lib/systemd/system/slurmwatch-node.service"
install -D -m 0644 contrib/node.conf "$stage/etc/slurmwatch/node.conf"
install -d "$stage/DEBIAN"
printf '%s\n' /etc/slurm/plugstack.conf.d/slurmwatch.conf /etc/slurmwatch/node.conf > "$stage/DEBIAN/conffiles"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: slurmwatch
Version: $pkg_version
Architecture: $arch
Maintainer: slurmwatch developers <slurmwatch@localhost>
Depends: libc6, munge, slurmd (>= $slurm_mm), slurmd (<< $next_mm), $libslurm_deb
Section: admin
Priority: optional
Description: per-job CPU, memory and GPU recording for Slurm (built for Slurm $slurm_mm)
 A SPANK plugin records each job's own cgroup and GPUs from inside the step into a
 per-job SQLite file; the slurmwatch command shows it live and after the job.
 This build's plugin matches Slurm $slurm_mm only; rebuild for other releases.
CONTROL
mkdir -p "$outdir"
rm -f "$outdir"/slurmwatch_*.deb
out="$outdir/slurmwatch_${pkg_version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage" "$out" >/dev/null
echo "$out"
