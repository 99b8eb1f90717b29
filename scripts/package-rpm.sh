#!/usr/bin/env bash
# Builds target/rpm/slurmwatch-<version>-1.slurm<mm>.<arch>.rpm for the host's Slurm, or with a
# release argument (24.11, 26.05) target/rpm-<release>/… with the plugin built against that
# release's headers (scripts/vm/plugin.sh) — the same contents as the Debian package
# (scripts/package-deb.sh): the plugin in Slurm's plugin directory (/usr/lib64/slurm on RHEL),
# slurmwatch, slurmwatch-epilog, man pages, bash completion, and an inactive
# /etc/slurm/plugstack.conf.d/slurmwatch.conf. It requires the Slurm major.minor it was built
# against, and its release field names it. Uses rpmbuild on prebuilt binaries (Debian's `rpm`
# package provides it); the binaries need glibc 2.34 at most (RHEL 9's), checked by the
# package test.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
command -v rpmbuild >/dev/null || { echo "package-rpm: rpmbuild not found: apt-get install rpm (or dnf install rpm-build)" >&2; exit 2; }
release=${1:-}
rel="$CARGO_TARGET_DIR/release"
. scripts/package-common.sh
package_build "$release"
outdir=target/rpm${release:+-$release}

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(uname -m)
slurm_mm=$(scripts/slurm-release.sh "$version_h")
next_mm=$(scripts/slurm-release.sh --next "$version_h")
top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
root="$top/root"

install -D -m 0755 "$plugin_so" "$root/usr/lib64/slurm/slurmwatch.so"
install -D -m 0755 "$rel/slurmwatch" "$root/usr/bin/slurmwatch"
install -D -m 0644 "$rel/libslurmwatch_quickack.so" "$root/usr/lib64/slurmwatch/libslurmwatch_quickack.so"
install -D -m 0755 "$rel/slurmwatch-epilog" "$root/usr/sbin/slurmwatch-epilog"
# The AdminComment's store through slurmdbd's API, next to slurmwatch where ctld-epilog looks.
install -D -m 0755 "$dbd_comment" "$root/usr/bin/slurmwatch-dbd-comment"
"$rel/slurmwatch" generate man "$top/man"
for page in "$top"/man/*.1; do install -D -m 0644 "$page" "$root/usr/share/man/man1/$(basename "$page")"; done
install -D -m 0644 "$top/man/slurmwatch-plugin.8" "$root/usr/share/man/man8/slurmwatch-plugin.8"
install -d "$root/usr/share/bash-completion/completions"
"$rel/slurmwatch" generate completions bash > "$root/usr/share/bash-completion/completions/slurmwatch"
install -D -m 0644 README.md "$root/usr/share/doc/slurmwatch/README.md"
# The user guide, admin guide and reference the README links to.
for doc in docs/*.md docs/reference/*.md; do install -D -m 0644 "$doc" "$root/usr/share/doc/slurmwatch/$doc"; done
install -D -m 0644 plugstack.conf.example "$root/usr/share/doc/slurmwatch/plugstack.conf.example"
install -D -m 0755 contrib/slurmctld-epilog.sh "$root/usr/share/slurmwatch/slurmctld-epilog.sh"
# The Grafana dashboard for one job, over the series `slurmwatch metrics` publishes.
install -D -m 0644 docs/grafana/slurmwatch-job.json "$root/usr/share/slurmwatch/grafana/slurmwatch-job.json"
install -D -m 0755 contrib/slurmwatch-mail.sh "$root/usr/share/slurmwatch/slurmwatch-mail.sh"
# The site file's example, every key at its default (docs/reference/site.md); not in /etc:
# without a site file the report uses the defaults.
install -D -m 0644 contrib/site.toml "$root/usr/share/slurmwatch/site.toml.example"
install -d -m 0755 "$root/var/spool/slurmwatch"
# The node service (slurmwatch metrics --listen), installed inactive, and its settings.
install -D -m 0644 contrib/slurmwatch-node.service "$root/usr/lib/systemd/system/slurmwatch-node.service"
install -D -m 0644 contrib/node.conf "$root/etc/slurmwatch/node.conf"
install -d "$root/etc/slurm/plugstack.conf.d"
cat > "$root/etc/slurm/plugstack.conf.d/slurmwatch.conf" <<CONF
# slurmwatch (built for Slurm $slurm_mm). Not active: remove the '#' below to enable it on
# this node (plugstack.conf needs: include /etc/slurm/plugstack.conf.d/*.conf).
# See slurmwatch-plugin(8); 'slurmwatch doctor' checks the set-up.
#optional /usr/lib64/slurm/slurmwatch.so default=off spool=/var/spool/slurmwatch
CONF

cat > "$top/slurmwatch.spec" <<SPEC
Name: slurmwatch
Version: $version
Release: 1.slurm$slurm_mm
Summary: Per-job CPU, memory and GPU recording for Slurm (built for Slurm $slurm_mm)
License: GPL-2.0-or-later
# munge: the node endpoint signs job summaries with it, EpilogSlurmctld checks them.
# slurmwatch-dbd-comment links the release's libslurm (SchedMD's slurm package provides it).
Requires: slurm-slurmd >= $slurm_mm, slurm-slurmd < $next_mm, munge, $libslurm_soname()(64bit)
AutoReqProv: no
%description
A SPANK plugin records each job's own cgroup and GPUs from inside the step into a per-job
SQLite file; the slurmwatch command shows it live and after the job. This build's plugin
matches Slurm $slurm_mm only; rebuild for other releases.
%install
cp -a $root/. %{buildroot}/
%files
/usr/lib64/slurm/slurmwatch.so
/usr/bin/slurmwatch
/usr/bin/slurmwatch-dbd-comment
/usr/lib64/slurmwatch
/usr/sbin/slurmwatch-epilog
/usr/share/man/man1/*
/usr/share/man/man8/slurmwatch-plugin.8*
/usr/share/bash-completion/completions/slurmwatch
/usr/share/slurmwatch
%doc /usr/share/doc/slurmwatch
%dir /var/spool/slurmwatch
%config(noreplace) /etc/slurm/plugstack.conf.d/slurmwatch.conf
/usr/lib/systemd/system/slurmwatch-node.service
%config(noreplace) /etc/slurmwatch/node.conf
SPEC
mkdir -p "$outdir"
rm -f "$outdir"/slurmwatch-*.rpm
rpmbuild -bb --quiet --define "_topdir $top/rpmbuild" --define "_rpmdir $top/out" \
  --define "_build_id_links none" --define "__os_install_post %{nil}" --define "debug_package %{nil}" \
  --target "$arch" "$top/slurmwatch.spec" >/dev/null
out="$outdir/slurmwatch-$version-1.slurm$slurm_mm.$arch.rpm"
mv "$(find "$top/out" -name "slurmwatch-$version-1.slurm$slurm_mm.*.rpm" | head -1)" "$out"
echo "$out"
