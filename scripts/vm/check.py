#!/usr/bin/env python3
"""Host side of the VM tier: reads each guest's results.json and fails when a check failed,
is missing, or the guest never finished. Prints what each check measured.

    scripts/vm/check.py RESULTS.json RELEASE GUEST_TESTS.txt

The host's Rust cluster tests the guest ran (GUEST_TESTS.txt lists them; their libtest
output is out/cluster-tests.log beside RESULTS.json) must each say `ok`.
"""
import json
import os
import re
import sys

# Every guest-only check the guest must report (a renamed or skipped check fails the tier);
# the listed Rust cluster tests are required by rust_checks below.
REQUIRED = [
    "memory: source cgroup_v2",
    "memory: a batch step with exit status 0",
    "report: joined with sacct (the sacct job record is there)",
    "oom: the kill counted from memory.events",
    "short steps: slurmstepd's own group is its step's step_<s>/slurm",
    "short steps: each joined the job's file, read from its cgroup, none moved aside",
    "stalls: job COMPLETED",
    "stalls: every row has the cpu, memory and io totals",
    "stalls: the kernel's cpu.pressure total mid-job lies between the recorded rows around it",
    "stalls: the report's cpu stall is the rows' exact difference",
    "stalls: four busy loops on one core wait for CPU most of the wall time",
    "admin comment: stored as JS1:H4sI, case intact, by the EpilogSlurmctld",
    "admin comment: jobstats' nodes.<node>.cpus is the job's allocated cores",
    "admin comment: jobstats' used_memory is the recording's peak working set",
    "admin comment: jobstats' total_memory is the job's 2500 MiB limit",
    "admin comment: jobstats' total_time is the run time, the node's is its CPU seconds",
    "admin comment: the report without the job's file has its peak from the summary",
    "admin comment: the 2-core job's summary has cpus 2",
]

path, release, listed = sys.argv[1], sys.argv[2], sys.argv[3]


def rust_checks():
    """One check per listed test, from libtest's `test NAME ... ok|FAILED|ignored` lines."""
    want = [l.strip() for l in open(listed) if l.strip() and not l.startswith("#")]
    try:
        log = open(os.path.join(os.path.dirname(path), "cluster-tests.log")).read()
    except OSError as e:
        log = ""
        print(f"vm {release}: no output of the cluster tests ({e})")
    said = dict(re.findall(r"^test (\S+) \.\.\. (\S+)$", log, re.M))
    failed = re.findall(r"^---- (\S+) stdout ----\n(.*?)(?=^---- |^failures:$)", log, re.M | re.S)
    why = {n: t.strip().replace("\n", " ")[-300:] for n, t in failed}
    return [{"name": f"cluster test {n}", "ok": said.get(n) == "ok",
             "detail": why.get(n, said.get(n, "did not run"))} for n in want]


try:
    r = json.load(open(path))
except (OSError, ValueError) as e:
    print(f"vm {release}: no results ({e})")
    sys.exit(1)
checks = r.get("checks", []) + rust_checks()
names = {c["name"] for c in checks}
if release == "26.05":
    REQUIRED.append("26.05: the job's cgroup directory is its SLUID and the plugin read it")
# The answer docs/admin.md records for this release (guest-tests.py's SACCTMGR_KEEPS_CASE).
REQUIRED.append({"24.11": "sacctmgr set AdminComment= stores the value, case kept as docs/admin.md says",
                 "26.05": "sacctmgr set AdminComment= stores the value, case kept as docs/admin.md says"}[release])
# ctld-epilog's store on each release (scripts/vm/test.sh's comment-store).
REQUIRED.append({"24.11": "admin comment: stored through the package's slurmwatch-dbd-comment",
                 "26.05": "admin comment: stored through sacctmgr, no slurmwatch-dbd-comment installed"}[release])
bad = [c for c in checks if not c["ok"]]
missing = [n for n in REQUIRED if n not in names]
if not str(r.get("slurm", "")).startswith(release + "."):
    bad.append({"name": f"guest runs Slurm {release}", "detail": r.get("slurm")})
# The guest ran the release's own package (scripts/package-deb.sh RELEASE), not a bare .so.
try:
    pkg = open(os.path.join(os.path.dirname(path), "package.txt")).read().strip()
except OSError:
    pkg = ""
pkg_check = {"name": f"the slurmwatch package for Slurm {release} is installed", "ok": pkg.endswith("+slurm" + release), "detail": pkg or "not installed"}
checks.append(pkg_check)
if not pkg_check["ok"]:
    bad.append(pkg_check)
print(f"vm {release}: Slurm {r.get('slurm')}, {len(checks) - len(bad)}/{len(checks)} checks passed")
for c in checks:
    print(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail'][:300]}")
for n in missing:
    print(f"  MISSING {n}")
if not r.get("done"):
    print("  the guest's tests did not run to the end")
sys.exit(1 if bad or missing or not r.get("done") else 0)
