#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the fast tier (unit and fixture
# tests), then the real-cluster tier in both job-tracking modes (cgroup, then /proc), then the
# VM tier: Slurm 24.11 and 26.05 on cgroup v2 in QEMU guests (scripts/vm/test.sh;
# VM_RELEASES="" skips it, VM_RELEASES=26.05 runs one).
# Safe to run twice. KEEP_CLUSTER=1 leaves the cluster running afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
# The VM tier's guest images (cached in /var/cache/slurmwatch-vm; on a machine without them,
# minutes of downloads and unpacking each): built in the background from here on, beside the
# builds and the host's tiers, and waited for before the VM tier.
images_pid=
if [ -n "${VM_RELEASES-24.11 26.05}" ]; then
  scripts/vm/deps.sh
  mkdir -p target
  # shellcheck disable=SC2086 # a list of releases
  (for r in ${VM_RELEASES-24.11 26.05}; do scripts/vm/image.sh "$r" || exit; done) > target/vm-images.log 2>&1 &
  images_pid=$!
fi

echo "== package at ${SECONDS} s"
# The production build (no fault injection) goes into the .deb first; the test build of the
# plugin below then only recompiles the plugin crate.
scripts/package-deb.sh
scripts/package-rpm.sh
# One .rpm per newer release too (the VM tier builds each release's plugin and .deb itself).
scripts/package-rpm.sh 24.11
scripts/package-rpm.sh 26.05

echo "== build at ${SECONDS} s"
# The test build of the plugin can be asked by a job to panic (fault-injection feature). The
# whole set is built again for the host's Slurm: the .rpm builds for the newer releases left
# theirs in target/release, and the CLI runs the host's slurmwatch-dbd-comment beside it.
scripts/cargo-release.sh --features slurmwatch-plugin/fault-injection
# The cluster tiers' plugin, kept apart: the VM tier builds each release's plugin in the same
# target directory (scripts/vm/plugin.sh).
mkdir -p target/cluster-plugin
cp -f target/release/libslurmwatch.so target/cluster-plugin/libslurmwatch.so
# The fake NVML library (tests/fake-nvml) that GPU jobs on the test cluster load.
cargo build --release --locked -p fake-nvml

echo "== fast tier at ${SECONDS} s"
# The mutation run over crafted recordings (core/tests/mutation.rs) runs 3000 cases here.
MUTATION_CASES=3000 cargo test --locked --workspace

# Afterwards: no cluster, or (KEEP_CLUSTER=1) the single-node one, as before the tests.
stop() {
  # A run cut short lets an image being built finish (the next run's cache).
  if [ -n "$images_pid" ]; then wait "$images_pid" 2>/dev/null || true; fi
  # A site tier cut short leaves its hosts up.
  if [ -e /run/slurmwatch-site/up ]; then scripts/site.sh down || true; fi
  if [ "${KEEP_CLUSTER:-0}" = 1 ]; then
    scripts/cluster.sh up cgroup target/cluster-plugin/libslurmwatch.so
  else
    scripts/cluster.sh down
  fi
}
trap stop EXIT
# A run cut off mid-test (a killed session) can leave a test's tmpfs mounted under the
# tests' scratch directory; rm would stop at it ("Device or resource busy").
awk '$2 ~ "^/tmp/slurmwatch-it/" {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l
rm -rf /tmp/slurmwatch-it
# proc mode (proctrack/linuxproc) runs the modules whose figures come from job tracking: the
# recorder, what reads its numbers back, and the plugin itself. The rest (endpoints, mail,
# sacct and squeue parsing, slurmdbd, Prometheus, the queue, packaging, hostile users against
# root's readers) does not depend on how the job is tracked, and runs once, in cgroup mode.
# jobs:: and history:: read recordings back as report:: does; they ran here too until
# 2026-12-07, when the test command neared its 60-minute budget on a fresh machine (the array
# test alone took over a minute).
PROC_MODULES="recorder:: efficiency:: plugin:: report:: cli:: gpu:: doctor:: harness::"
# Within those modules, the tests whose outcome no job-tracking figure reaches run once, in
# cgroup mode (2026-12-08, libtest's --report-time in cgroup mode: 331 of these modules' 898
# test-seconds, lock waits included): the cards' ledger, hold and slowdown (NVML's counters,
# not the job's processes), which cards root opens (GRES), bad input, the report's sacct
# time-out and HTML, and the harness's own clean-up.
PROC_SKIP="gpu::a_scripted_slowdown_is_placed_beside_the_cards_hold
gpu::a_three_second_gpu_job_gets_exact_ledger_totals
gpu::a_throttled_card_is_live_and_a_finding_with_its_minutes
gpu::cards_named_by_the_job_alone_are_not_read
cli::bad_input_gets_one_sentence_and_the_documented_code
report::report_bad_input_is_one_sentence_and_exit_2
report::report_timeout_never_shortens_time
report::report_html_renders_in_headless_chromium
harness::a_failing_test_cancels_its_running_job"
for mode in ${MODES:-cgroup proc}; do
  echo "== cluster tier ($mode mode) at ${SECONDS} s"
  scripts/cluster.sh up "$mode" target/cluster-plugin/libslurmwatch.so
  if [ "$mode" = proc ]; then
    # shellcheck disable=SC2086,SC2046 # a list of filters, one --skip per name
    cargo test --locked --test cluster -- --ignored --test-threads=2 $PROC_MODULES $(printf -- '--skip %s ' $PROC_SKIP)
  else
    cargo test --locked --test cluster -- --ignored --test-threads=2
  fi
done
echo "== cluster tier (2 nodes on this machine) at ${SECONDS} s"
NODES=2 scripts/cluster.sh up cgroup target/cluster-plugin/libslurmwatch.so
cargo test --locked --test cluster -- --ignored multinode
echo "== cluster tier (3 nodes on this machine) at ${SECONDS} s"
NODES=3 scripts/cluster.sh up cgroup target/cluster-plugin/libslurmwatch.so
cargo test --locked --test cluster -- --ignored multinode_three
echo "== site tier (ctl, login, c1, c2 in namespaces: scripts/site.sh) at ${SECONDS} s"
# A controller, a login host and two compute hosts, each its own namespaces, the .deb of the
# package stage configured as docs/admin.md says; the tests run on the login host.
scripts/site.sh up
site_rc=0
scripts/site.sh on login cargo test --locked --test cluster -- --ignored --test-threads=2 site:: || site_rc=$?
scripts/site.sh down
[ "$site_rc" = 0 ] || exit "$site_rc"
# Every phase-gated test ran somewhere (only meaningful when every phase above ran).
if [ -z "${MODES:-}" ]; then scripts/check-phases.sh; fi
echo "== vm tier (Slurm ${VM_RELEASES-24.11 26.05} on cgroup v2, in QEMU guests) at ${SECONDS} s"
if [ -n "${VM_RELEASES-24.11 26.05}" ]; then
  # The guests need the CPUs: the host's cluster is not used by this tier.
  scripts/cluster.sh down
  t_wait=$SECONDS
  if ! wait "$images_pid"; then
    echo "vm tier: building the guest images failed:"
    tail -n 40 target/vm-images.log
    exit 1
  fi
  images_pid=
  echo "vm tier: images ready ($((SECONDS - t_wait)) s waited; built beside the other tiers: target/vm-images.log)"
  grep -h "image .*\(up to date\|built\)" target/vm-images.log || true
  # shellcheck disable=SC2086 # a list of releases
  scripts/vm/test.sh ${VM_RELEASES-24.11 26.05}
fi
echo "== done in ${SECONDS} s"
