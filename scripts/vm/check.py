#!/usr/bin/env python3
"""Host side of the VM tier: fails a guest whose Slurm is not the release, whose slurmwatch
package is not the release's, or where a listed Rust cluster test did not say `ok`.

    scripts/vm/check.py OUT RELEASE GUEST_TESTS.txt

OUT is the guest's share/out (scripts/vm/guest-run.sh writes slurm-version.txt, package.txt
and cluster-tests.log, libtest's output, there). Each test GUEST_TESTS.txt lists is required:
a renamed, skipped or missing test fails the tier (tests/cluster/cgroup_v2.rs holds the
release-specific expectations: the SLUID directory, the comment store, sacctmgr's case).
"""
import os
import re
import sys

out, release, listed = sys.argv[1], sys.argv[2], sys.argv[3]


def read(name):
    try:
        return open(os.path.join(out, name)).read()
    except OSError as e:
        print(f"vm {release}: no {name} ({e})")
        return ""


def rust_checks():
    """One check per listed test, from libtest's `test NAME ... ok|FAILED|ignored` lines."""
    want = [l.strip() for l in open(listed) if l.strip() and not l.startswith("#")]
    log = read("cluster-tests.log")
    said = dict(re.findall(r"^test (\S+) \.\.\. (\S+)$", log, re.M))
    failed = re.findall(r"^---- (\S+) stdout ----\n(.*?)(?=^---- |^failures:$)", log, re.M | re.S)
    # The panic's message, not the backtrace after it.
    why = {n: t.split("stack backtrace:")[0].strip().replace("\n", " ")[-300:] for n, t in failed}
    return [{"name": f"cluster test {n}", "ok": said.get(n) == "ok",
             "detail": why.get(n, said.get(n, "did not run"))} for n in want]


# `sinfo -V`: "slurm 26.05.5".
slurm = (read("slurm-version.txt").split() + ["", "?"])[1]
# The guest ran the release's own package (scripts/package-deb.sh RELEASE), not a bare .so.
pkg = read("package.txt").strip()
checks = [
    {"name": f"guest runs Slurm {release}", "ok": slurm.startswith(release + "."), "detail": slurm},
    {"name": f"the slurmwatch package for Slurm {release} is installed",
     "ok": pkg.endswith("+slurm" + release), "detail": pkg or "not installed"},
] + rust_checks()
bad = [c for c in checks if not c["ok"]]
print(f"vm {release}: Slurm {slurm}, {len(checks) - len(bad)}/{len(checks)} checks passed")
for c in checks:
    print(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail'][:300]}")
sys.exit(1 if bad else 0)
