#!/usr/bin/env bash
# The VM tier of the test command: for each Slurm release, build (cached) its guest image and
# the plugin against its headers, boot it, run the host's Rust cluster tests that
# scripts/vm/guest-tests.txt lists (tests/cluster/cgroup_v2.rs's guest-only ones among them) on
# the real daemons inside, and check the results on the host.
#
#   scripts/vm/test.sh [24.11] [26.05]      (default: both)
# Results and logs: $VM_CACHE/run-<release>/ (share/out/cluster-tests.log, run.log, console logs).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/vm/common.sh
releases=("$@")
((${#releases[@]})) || releases=(24.11 26.05)
target=${CARGO_TARGET_DIR:-target}
t_all=$SECONDS

scripts/vm/deps.sh
# The CLI runs in the guests as built here (Debian 12's glibc is older than trixie's and sid's),
# in the one target directory the packages and the test builds share (nothing compiles twice).
# The plugin built for the host's Slurm (22.05) too: each guest's doctor must name it as refused.
CARGO_TARGET_DIR=$target scripts/cargo-release.sh >&2
mkdir -p "$target/slurm-host"
cli=$target/slurm-host/slurmwatch
cp -f "$target/release/slurmwatch" "$cli"
cp -f "$target/release/libslurmwatch_quickack.so" "$target/slurm-host/libslurmwatch_quickack.so"
cp -f "$target/release/libslurmwatch.so" "$target/slurm-host/libslurmwatch.so"
# The host's Rust cluster tests, run in each guest (the ones scripts/vm/guest-tests.txt lists).
tests_bin=$(CARGO_TARGET_DIR=$target cargo test --locked --test cluster --no-run --message-format=json ${CARGO_JOBS:+-j "$CARGO_JOBS"} |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "cluster" and m.get("executable"):
        print(m["executable"])')
[ -x "$tests_bin" ] || { echo "vm tier: the cluster tests did not build" >&2; exit 1; }

fail=0
for rel in "${releases[@]}"; do
  rel=$(release_of "$rel")
  suite=$(suite_of "$rel")
  t0=$SECONDS
  echo "== vm tier: Slurm $rel ($suite, cgroup v2)"
  scripts/vm/image.sh "$rel"
  t_img=$((SECONDS - t0))
  # The guest installs the release's .deb; building it builds that release's plugin and
  # slurmwatch-dbd-comment first (scripts/vm/plugin.sh → target/slurm-<release>/).
  scripts/package-deb.sh "$rel" >&2
  run=$VM_CACHE/run-$rel
  rm -rf "$run"
  mkdir -p "$run/share"
  cp scripts/vm/guest-run.sh "$run/share/run.sh"
  cp scripts/vm/guest-tests.txt "$run/share/guest-tests.txt"
  cp "$tests_bin" "$run/share/cluster-tests"
  cp "$target/slurm-$rel/libslurmwatch.so" "$cli" "$target/slurm-host/libslurmwatch_quickack.so" target/debian-"$rel"/slurmwatch_*.deb "$run/share/"
  cp "$target/slurm-host/libslurmwatch.so" "$run/share/slurmwatch-22.05.so"
  # The library the package's slurmwatch-dbd-comment links (scripts/vm/plugin.sh). 24.11
  # stores the AdminComment through that program, 26.05 through its sacctmgr (a site without
  # it): each of ctld-epilog's two ways on a release that keeps the case.
  cp "$target/slurm-$rel"/libslurm*.deb "$run/share/"
  case $rel in 24.11) echo package ;; *) echo sacctmgr ;; esac > "$run/share/comment-store"
  t1=$SECONDS
  if scripts/vm/boot.sh "$suite" "$run/share" "${VM_TIMEOUT:-1500}"; then :; else
    echo "vm $rel: the guest did not finish; last console lines:"
    tail -n 30 "$run"/share/console-*.log 2>/dev/null | tail -n 40 || true
    tail -n 30 "$run/share/out/run.log" 2>/dev/null || true
  fi
  t_vm=$((SECONDS - t1))
  if python3 scripts/vm/check.py "$run/share/out" "$rel" scripts/vm/guest-tests.txt; then :; else fail=1; fi
  stages=$(tr '\n' ' ' < "$run/share/out/stages.txt" 2>/dev/null || true)
  echo "vm $rel: image ${t_img} s, guest ${t_vm} s (guest uptime at: $stages), total $((SECONDS - t0)) s"
done
echo "== vm tier: $((SECONDS - t_all)) s"
exit $fail
