#!/usr/bin/env python3
"""The VM tier's guest-only checks, run inside the guest (Slurm 24.11 or 26.05 on cgroup v2) by
run.sh after the host's Rust cluster tests (scripts/vm/guest-tests.txt lists those): only what
the host's 22.05 cgroup v1 cluster cannot show (cgroup v2's files and PSI, 26.05's SLUID
directories, this release's AdminComment stores and sacctmgr), never an expectation a Rust
cluster test already holds. Every check is written to OUT/results.json with what it measured;
scripts/vm/check.py on the host fails the tier on a failed or missing check.

    python3 tests.py OUT
"""

import json
import os
import pwd
import re
import sqlite3
import subprocess
import sys
import time
import traceback

OUT = sys.argv[1]
SPOOL = "/var/spool/slurmwatch"
MIB = 1024 * 1024
USER1, USER2 = "swuser1", "swuser2"
WAIT = 400  # seconds: TCG is slow, and jobs queue behind each other on the 2-CPU node

results = {"checks": [], "measured": {}, "columns": None}


def version():
    o = subprocess.run(["sinfo", "-V"], capture_output=True, text=True).stdout.split()
    return o[1] if len(o) > 1 else "?"


RELEASE = version()
results["slurm"] = RELEASE
MAJOR_MINOR = ".".join(RELEASE.split(".")[:2])


def save():
    tmp = os.path.join(OUT, "results.json.tmp")
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1, default=str)
    os.replace(tmp, os.path.join(OUT, "results.json"))


def check(name, ok, detail=""):
    results["checks"].append({"name": name, "ok": bool(ok), "detail": str(detail)})
    print(("PASS " if ok else "FAIL ") + name + (": " + str(detail) if detail else ""), flush=True)
    save()


def measure(key, value):
    results["measured"][key] = value
    save()


def run(args, user=None, check_rc=False, timeout=120, env=None):
    if user:
        args = ["runuser", "-u", user, "--", "env"] + [f"{k}={v}" for k, v in (env or {}).items()] + args
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check_rc and p.returncode != 0:
        raise RuntimeError(f"{args}: exit {p.returncode}: {p.stderr.strip()}")
    return p


class Job:
    def __init__(self, name, script, args, user=USER1):
        self.name, self.user = name, user
        self.dir = f"/var/tmp/swvm/{name}"
        os.makedirs(self.dir, exist_ok=True)
        pw = pwd.getpwnam(user)
        os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        path = os.path.join(self.dir, "job.sh")
        with open(path, "w") as f:
            f.write("#!/bin/bash\n" + script)
        os.chmod(path, 0o755)
        o = run(["sbatch", "--parsable", "-J", name, "-D", self.dir, "-o", "out.txt"] + args + [path],
                user=user, check_rc=True)
        self.id = int(o.stdout.strip().split(";")[0])
        print(f"submitted {name} as job {self.id}", flush=True)

    def output(self):
        try:
            return open(os.path.join(self.dir, "out.txt")).read()
        except OSError:
            return ""

    def state(self):
        o = run(["sacct", "-n", "-P", "-X", "-j", str(self.id), "-o", "State"]).stdout.strip()
        return o.split("\n")[0].split()[0] if o else ""

    def wait(self, timeout=WAIT):
        end = time.time() + timeout
        ended = None
        while time.time() < end:
            s = self.state()
            if s and s not in ("PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "COMPLETING"):
                ended = ended or time.time()
                # the scheduler may say COMPLETED before slurmd ran the epilog
                sq = run(["squeue", "-h", "-j", str(self.id), "-o", "%T"]).stdout.strip()
                if not sq:
                    # How long slurmctld held the ended job (its epilogs, the EpilogSlurmctld
                    # storing the summary), to the poll's second.
                    results["measured"].setdefault("held_after_end_s", {})[self.name] = round(time.time() - ended, 1)
                    return s
            time.sleep(1)
        raise RuntimeError(f"job {self.id} ({self.name}) not done after {timeout}s: {self.state()}")

    def wait_running(self, timeout=WAIT):
        end = time.time() + timeout
        while time.time() < end:
            s = run(["squeue", "-h", "-j", str(self.id), "-o", "%T"]).stdout.strip()
            if s == "RUNNING":
                return
            time.sleep(0.5)
        raise RuntimeError(f"job {self.id} never ran")

    def sacct(self):
        o = run(["sacct", "-n", "-P", "-j", str(self.id), "-o", "JobID,State,TotalCPU,ExitCode,MaxRSS"]).stdout
        return [dict(zip(["job_id", "state", "total_cpu", "exit", "maxrss"], l.split("|"))) for l in o.splitlines() if l]


def spool(job):
    return os.path.join(SPOOL, f"{job.id}.sqlite")


def rows(job, series="job"):
    """The `samples` view's rows of one series: 'job' or a step's name."""
    db = sqlite3.connect(f"file:{spool(job)}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    cur = db.execute("SELECT * FROM samples WHERE series = ? ORDER BY t_unix_ms", (series,))
    rs = [dict(r) for r in cur]
    if results["columns"] is None and rs:
        results["columns"] = list(rs[0].keys())
    db.close()
    return rs


def meta(job):
    db = sqlite3.connect(f"file:{spool(job)}?mode=ro", uri=True)
    m = dict(db.execute("SELECT key, value FROM meta"))
    steps = [dict(zip(["id", "step", "started", "ended", "tasks", "exit_status"], r))
             for r in db.execute("SELECT id, step, started_unix_ms, ended_unix_ms, tasks, exit_status FROM steps")]
    db.close()
    return m, steps


def job_cgroup_dir(job, text=None):
    text = text if text is not None else job.output()
    m = re.search(r"^cgroup (\S+)$", text, re.M)
    if not m:
        raise RuntimeError(f"job printed no cgroup path: {text!r}")
    return "/sys/fs/cgroup" + re.sub(r"/step_.*", "", m.group(1))


def cg_read(d, f):
    return open(os.path.join(d, f)).read()


def slurmwatch_json(args, user=USER1):
    o = run(["slurmwatch"] + args, user=user, timeout=180)
    try:
        return json.loads(o.stdout), o
    except ValueError:
        raise RuntimeError(f"slurmwatch {args}: exit {o.returncode}, not JSON: {o.stdout[:400]!r} {o.stderr[:400]!r}")


def report(job, user=USER1, wait_summary=True):
    end = time.time() + 60
    while True:
        r, o = slurmwatch_json(["report", str(job.id), "--json"], user=user)
        if not wait_summary or r.get("summary_stored") or time.time() > end:
            return r
        time.sleep(1)


def test(fn):
    t0 = time.time()
    try:
        fn()
    except Exception as e:  # a crash of the test is a failed check, never a pass
        check(fn.__name__ + " (ran to the end)", False, f"{e!r}\n{traceback.format_exc()}")
    measure("seconds_" + fn.__name__, round(time.time() - t0, 1))


# ---------------------------------------------------------------------------------------------

MEMORY_SCRIPT = r"""
echo "cgroup $(cut -d: -f3 /proc/self/cgroup)"
echo "sluid ${SLURM_JOB_SLUID:-none}"
cg=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup | sed 's|/step_.*||')
python3 - "$cg" <<'PY'
import sys, time
cg = sys.argv[1]
def ws():
    usage = int(open(cg + "/memory.current").read())
    st = dict(l.split() for l in open(cg + "/memory.stat"))
    return usage - int(st["active_file"]) - int(st["inactive_file"])
base = ws()
print("baseline", base, flush=True)
MiB = 1024 * 1024
a = bytearray(200 * MiB)
for i in range(0, len(a), 4096): a[i] = 1
time.sleep(3)
b = bytearray(400 * MiB)
for i in range(0, len(b), 4096): b[i] = 1
time.sleep(3)
del b
time.sleep(3)
PY
dd if=/dev/zero of=big bs=1M count=1024 status=none
cat big > /dev/null
sleep 3
rm -f big
echo "kernel_peak $(cat $cg/memory.peak)"
"""

CPU_SCRIPT = r"""
burn() { local end=$((SECONDS + $1)); while ((SECONDS < end)); do :; done; }
burn 6 & burn 6 &
for i in $(seq 60); do ( i=0; while ((i < 3000)); do ((i++)); done ) ; done
wait
times
"""

OOM_SCRIPT = r"""
python3 - <<'PY'
import time
MiB = 1024 * 1024
a = bytearray(100 * MiB)
for i in range(0, len(a), 4096): a[i] = 1
time.sleep(6)
# One memset in C: the climb to the limit takes well under a sampling interval even on a
# loaded host (a page-by-page Python loop took over a second there, and the last reading
# before the kill, 263 MiB, was the climb's, not the steady 100 MiB).
b = b"\x01" * (500 * MiB)
time.sleep(2)
PY
"""


def t_recorded_jobs():
    mem = Job("memory", MEMORY_SCRIPT, ["--slurmwatch=5", "--mem=2500M"])
    cpu = Job("cpu", CPU_SCRIPT, ["--slurmwatch=2", "--cpus-per-task=2", "--mem=500M"])
    oom = Job("oom", OOM_SCRIPT, ["--slurmwatch=1", "--mem=300M"])
    states = {j.name: j.wait() for j in (mem, cpu, oom)}
    measure("job_states", states)
    RECORDED.update(memory=mem, cpu=cpu)
    check_memory(mem, states["memory"])
    check_oom(oom, states["oom"])


RECORDED = {}  # t_recorded_jobs' finished jobs, for t_admin_comment


def admin_comment(job):
    o = run(["sacct", "-j", str(job.id), "-X", "-n", "-o", "AdminComment%20000"], check_rc=True)
    return o.stdout.strip()


def admin_comment_when(job, ok, timeout=90):
    """The job's AdminComment once ok(it) holds, else the last one read after `timeout` s."""
    end = time.time() + timeout
    while True:
        c = admin_comment(job)
        if ok(c) or time.time() > end:
            return c
        time.sleep(1)


def jobstats_decode(s):
    """As jobstats' docs show (and its own code reads it)."""
    import base64
    import gzip
    return json.loads(gzip.decompress(base64.b64decode(s[4:])))


# What this release's `sacctmgr ... set AdminComment=` does to the value's case (docs/admin.md,
# "Slurm 22.05 and the case of the value"; 22.05.8 lowercases it).
SACCTMGR_KEEPS_CASE = {"24.11": True, "26.05": True}


def t_admin_comment():
    """docs/admin.md, "Every job's summary in slurmdbd": the packaged EpilogSlurmctld asks the
    node's endpoint for each recorded job's summary and stores it (through slurmwatch-dbd-comment,
    or sacctmgr where that is not installed and the release keeps the case)
    as jobstats' JS1: AdminComment, case intact; decoded as jobstats' docs show it holds
    jobstats' keys with the recording's figures, and the report reads it without the file.
    Then whether this release's sacctmgr keeps the case of a value it stores."""
    mem, cpu = RECORDED["memory"], RECORDED["cpu"]
    node = run(["hostname", "-s"], check_rc=True).stdout.strip()
    t0 = time.time()
    c = admin_comment_when(mem, lambda c: c.startswith("JS1:"))
    measure("admin_comment_wait_s", round(time.time() - t0, 1))
    measure("admin_comment_memory_job", c[:200] + f"... ({len(c)} characters)")
    log = ""
    try:
        log = open("/var/log/slurm/ctld-epilog.log").read()[-1500:]
    except OSError as e:
        log = repr(e)
    check("admin comment: stored as JS1:H4sI, case intact, by the EpilogSlurmctld", c.startswith("JS1:H4sI"),
          f"{c[:60]!r}; ctld-epilog.log: {log}")
    # Which of ctld-epilog's two stores did it (guest-run.sh's comment-store): the package's
    # slurmwatch-dbd-comment, or, where that is not installed, this release's sacctmgr.
    store = open("/share/comment-store").read().strip()
    owner = run(["dpkg", "-S", "/usr/bin/slurmwatch-dbd-comment"]).stdout.split(":")[0]
    if store == "package":
        check("admin comment: stored through the package's slurmwatch-dbd-comment",
              owner == "slurmwatch" and "SW1" not in log, f"owner {owner!r}; ctld-epilog.log: {log}")
    else:
        check("admin comment: stored through sacctmgr, no slurmwatch-dbd-comment installed",
              not os.path.exists("/usr/bin/slurmwatch-dbd-comment") and "SW1" not in log,
              f"present {os.path.exists('/usr/bin/slurmwatch-dbd-comment')}; ctld-epilog.log: {log}")
    d = jobstats_decode(c)
    keys = {k: v for k, v in d.items() if k != "slurmwatch"}
    measure("admin_comment_jobstats_keys", keys)
    r, _ = slurmwatch_json(["report", str(mem.id), "--json", "--no-log"])
    n = (d.get("nodes") or {}).get(node) or {}
    rc, rm = r.get("cpu") or {}, r.get("memory") or {}
    alloc = run(["sacct", "-j", str(mem.id), "-X", "-n", "-P", "-o", "AllocCPUS"], check_rc=True).stdout.strip()
    check("admin comment: jobstats' nodes.<node>.cpus is the job's allocated cores",
          list(d.get("nodes") or {}) == [node] and n.get("cpus") == int(alloc) == rc.get("cores_allocated"),
          f"nodes {list(d.get('nodes') or {})}, cpus {n.get('cpus')}, sacct AllocCPUS {alloc}, report {rc.get('cores_allocated')}")
    peak = rm.get("peak_working_set_bytes")
    ws = max((x.get("memory_working_set_max_bytes") or x.get("memory_working_set_bytes") or 0) for x in rows(mem))
    check("admin comment: jobstats' used_memory is the recording's peak working set",
          n.get("used_memory") == peak and abs(peak - ws) <= 0.01 * ws and peak > 600 * MIB,
          f"used_memory {n.get('used_memory')}, report {peak}, file rows {ws}")
    check("admin comment: jobstats' total_memory is the job's 2500 MiB limit",
          n.get("total_memory") == 2500 * MIB == rm.get("limit_bytes"), f"{n.get('total_memory')}, report {rm.get('limit_bytes')}")
    cpu_s = rc.get("usage_seconds_total")
    check("admin comment: jobstats' total_time is the run time, the node's is its CPU seconds",
          d.get("total_time") == r.get("elapsed_seconds") and d.get("total_time", 0) >= 12  # the job sleeps 12 s
          and cpu_s is not None and n.get("total_time") == round(cpu_s * 1000) / 1000,
          f"total_time {d.get('total_time')} (report elapsed {r.get('elapsed_seconds')}), node {n.get('total_time')} (report CPU {cpu_s})")
    # The report from the AdminComment alone: the job's file moved away.
    away = f"/var/tmp/swvm/away-{mem.id}.sqlite"
    os.rename(spool(mem), away)
    try:
        a, _ = slurmwatch_json(["report", str(mem.id), "--json", "--no-log"])
    finally:
        os.rename(away, spool(mem))
    check("admin comment: the report without the job's file has its peak from the summary",
          a.get("source") == "slurmdbd_summary" and (a.get("memory") or {}).get("peak_working_set_bytes") == peak,
          f"source {a.get('source')}, peak {(a.get('memory') or {}).get('peak_working_set_bytes')} (file's {peak})")
    # A second job, two cores: its summary says so.
    cc = admin_comment_when(cpu, lambda c: c.startswith("JS1:"))
    dc = jobstats_decode(cc) if cc.startswith("JS1:H4sI") else {}
    check("admin comment: the 2-core job's summary has cpus 2",
          ((dc.get("nodes") or {}).get(node) or {}).get("cpus") == 2, f"{cc[:40]!r} {dc.get('nodes')}")
    # This release's sacctmgr and the case of the value (22.05.8 lowercases it).
    value = "JS1:AbCdEf+/="
    o = run(["sacctmgr", "-i", "modify", "job", "where", f"jobid={cpu.id}", "set", f"AdminComment={value}"])
    back = admin_comment_when(cpu, lambda c: c.lower() == value.lower(), timeout=30)
    kept = back == value
    measure("sacctmgr_keeps_case", {"release": RELEASE, "stored": value, "read_back": back, "kept": kept})
    want = SACCTMGR_KEEPS_CASE.get(MAJOR_MINOR)
    check(f"sacctmgr set AdminComment= stores the value, case {'kept' if want else 'lowercased'} as docs/admin.md says",
          back.lower() == value.lower() and kept == want,
          f"stored {value!r}, read back {back!r} (sacctmgr exit {o.returncode}: {(o.stdout + o.stderr).strip()[:200]})")


def check_memory(job, state):
    out = job.output()
    measure("memory_job_output", out)
    check("memory: job COMPLETED", state == "COMPLETED", state)
    baseline = float(re.search(r"^baseline (\d+)", out, re.M).group(1))
    m, steps = meta(job)
    measure("memory_meta", m)
    measure("memory_steps", steps)
    check("memory: source cgroup_v2", m.get("source") == "cgroup_v2", m.get("source"))
    rs = rows(job)
    peak_ws = max((r.get("memory_working_set_max_bytes") or r.get("memory_working_set_bytes") or 0) for r in rs)
    expected = baseline + 600 * MIB
    measure("memory_peak_working_set_mib", {"recorded": peak_ws / MIB, "expected": expected / MIB, "baseline": baseline / MIB})
    lifetime = max((r.get("memory_lifetime_peak_bytes") or 0) for r in rs)
    measure("memory_lifetime_peak_mib", lifetime / MIB)
    kp = re.search(r"^kernel_peak (\d+)", out, re.M)
    if kp:
        k = int(kp.group(1))
        measure("memory_kernel_peak_mib", k / MIB)
        check("memory: lifetime peak is the job cgroup's memory.peak (within 2 %)", abs(lifetime - k) / k <= 0.02,
              f"{lifetime / MIB:.1f} vs {k / MIB:.1f} MiB")
    end = [r for r in rs if r.get("kind") == "end"]
    check("memory: the job series has an end row", bool(end), len(rs))
    check("memory: page cache recorded", max((r.get("memory_cache_bytes") or 0) for r in rs) > 900 * MIB,
          max((r.get("memory_cache_bytes") or 0) for r in rs) / MIB)
    for kind in ("cpu_some", "memory_some", "memory_full", "io_some", "io_full"):
        col = f"pressure_{kind}_avg10_percent"
        n = sum(1 for r in rs if r.get(col) is not None)
        check(f"memory: PSI column {col} filled", n >= len(rs) - 1 and n > 0, f"{n}/{len(rs)} rows")
    batch = [s for s in steps if s["step"] == "batch"]
    check("memory: a batch step with exit status 0", batch and batch[0]["exit_status"] == 0 and batch[0]["ended"], batch)
    if batch:
        brs = rows(job, "batch")
        check("memory: the batch step has its own rows", len(brs) >= 2, len(brs))
        lim = [r.get("memory_limit_bytes") for r in brs]
        check("memory: the step's memory limit is recorded (step_batch/user/memory.max)",
              any(v == 2500 * MIB for v in lim), sorted(set(lim), key=str)[:4])
    jl = [r.get("memory_limit_bytes") for r in rs]
    check("memory: the job's memory limit is recorded", any(v == 2500 * MIB for v in jl), sorted(set(jl), key=str)[:4])
    # 26.05 names the job's cgroup by its SLUID, not job_<id>
    cg = job_cgroup_dir(job, out)
    sluid = re.search(r"^sluid (\S+)", out, re.M).group(1)
    measure("memory_job_cgroup", cg)
    if MAJOR_MINOR >= "26.05":
        check("26.05: the job's cgroup directory is its SLUID and the plugin read it",
              sluid != "none" and os.path.basename(cg) == sluid and m.get("source") == "cgroup_v2" and lifetime > 0,
              f"{cg} (SLURM_JOB_SLUID {sluid})")
    else:
        check("the job's cgroup directory is job_<id>", os.path.basename(cg) == f"job_{job.id}", cg)
    # report joined with this release's sacct
    r = report(job)
    measure("memory_report_keys", sorted(r.keys()))
    check("report: source recorded_file, summary stored", r.get("source") == "recorded_file" and r.get("summary_stored") is True,
          (r.get("source"), r.get("summary_stored")))
    sa = r.get("sacct") or {}
    sj = sa.get("job") or {}
    check("report: joined with sacct (the sacct job record is there)", bool(sj) and str(sj.get("JobID", sj.get("JobIDRaw", ""))).startswith(str(job.id)),
          {k: sj.get(k) for k in list(sj)[:8]})
    check("report: state COMPLETED from sacct", r.get("state") == "COMPLETED", r.get("state"))
    rm = r.get("memory") or {}
    check("report: peak working set and lifetime peak match the file",
          abs((rm.get("peak_working_set_bytes") or 0) - peak_ws) <= 0.01 * peak_ws
          and abs((rm.get("lifetime_peak_bytes") or 0) - lifetime) <= 0.01 * lifetime,
          (rm.get("peak_working_set_bytes"), rm.get("lifetime_peak_bytes")))
    steps_r = [s.get("step") for s in r.get("steps") or []]
    check("report: lists the batch step", "batch" in steps_r, steps_r)
    nos, _ = slurmwatch_json(["report", str(job.id), "--json", "--no-sacct"])
    bst = [s for s in nos.get("steps") or [] if s.get("step") == "batch"]
    measure("report_no_sacct_batch_step", bst)
    check("report --no-sacct: the batch step keeps its CPU and peak from the file",
          bst and any(v is not None for k, v in bst[0].items() if "cpu" in k)
          and any(v is not None for k, v in bst[0].items() if "peak" in k or "memory" in k), bst[:1])


def check_oom(job, state):
    check("oom: job OUT_OF_MEMORY", state == "OUT_OF_MEMORY", state)
    m, steps = meta(job)
    rs = rows(job)
    kills = max(r.get("memory_oom_kills") or 0 for r in rs)
    measure("oom_kills_recorded", kills)
    check("oom: the kill counted from memory.events", kills >= 1, kills)
    batch = [s for s in steps if s["step"] == "batch"]
    if batch:
        brs = rows(job, "batch")
        check("oom: the batch step's rows count the kill", max(r.get("memory_oom_kills") or 0 for r in brs) >= 1,
              [r.get("memory_oom_kills") for r in brs][-3:])
        check("oom: the batch step's exit status is recorded as a failure", batch[0]["exit_status"] not in (None, 0), batch[0])


STALL_SCRIPT = """
echo "cgroup $(grep ^0:: /proc/self/cgroup | cut -d: -f3)"
for i in 1 2 3 4; do ( t=$(date +%s); while [ $(( $(date +%s) - t )) -lt 12 ]; do :; done ) & done
wait
"""


def psi_total(text, kind):
    m = re.search(rf"^{kind} .*total=(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def t_stall_ledger():
    """PSI's stall totals (issue 39's ledger) on cgroup v2: four busy loops on the job's one
    core keep some task always waiting for CPU. The recorded totals bracket the kernel's own
    counter read mid-job (each row's reading and its timestamp are a few ms apart, and the
    counter climbs at up to 1 µs per µs then: 50 ms of slack, plus the file's ms rounding), and
    the report's ledger is exactly the difference of the first and last rows."""
    job = Job("stalls", STALL_SCRIPT, ["--slurmwatch=1", "-c", "1", "--mem=200M"])
    job.wait_running()
    end = time.time() + 60
    while "cgroup " not in job.output() and time.time() < end:
        time.sleep(0.5)
    d = job_cgroup_dir(job)
    kernel = []
    for _ in range(3):
        time.sleep(2)
        kernel.append((time.time() * 1000, psi_total(cg_read(d, "cpu.pressure"), "some")))
    state = job.wait()
    check("stalls: job COMPLETED", state == "COMPLETED", state)
    col = "pressure_cpu_some_total_usec"
    rs = [r for r in rows(job) if r.get(col) is not None]
    check("stalls: every row has the cpu, memory and io totals",
          rs and all(r.get(f"pressure_{res}_{k}_total_usec") is not None
                     for r in rows(job) for res in ("cpu", "memory", "io") for k in ("some", "full")),
          rows(job)[-1:])
    slack = 50_000 + 500
    brackets = []
    for t, k in kernel:
        before = [r[col] for r in rs if r["t_unix_ms"] <= t]
        after = [r[col] for r in rs if r["t_unix_ms"] >= t]
        brackets.append((before[-1] if before else None, k, after[0] if after else None))
    measure("stall_brackets_usec", brackets)
    check("stalls: the kernel's cpu.pressure total mid-job lies between the recorded rows around it",
          len(brackets) == 3 and all(b is not None and a is not None and k is not None
                                     and b - slack <= k <= a + slack for b, k, a in brackets), brackets)
    r = report(job)
    l = r.get("ledger") or {}
    exact = (rs[-1][col] - rs[0][col]) / 1e6 if rs else None
    got = (l.get("stall_seconds") or {}).get("cpu_some")
    measure("stall_ledger", l)
    check("stalls: the report's cpu stall is the rows' exact difference",
          exact is not None and got is not None and abs(got - exact) < 1e-6, f"{got} vs {exact}")
    share = (l.get("stall_share_of_wall") or {}).get("cpu_some")
    check("stalls: four busy loops on one core wait for CPU most of the wall time",
          share is not None and share >= 0.5 and l.get("stalls_unavailable") is None, l)


SHORT_STEPS = 12
SHORT_SCRIPT = f"""
srun -n1 bash -c 'echo "stepd $(grep ^0:: /proc/$PPID/cgroup)"'
for i in $(seq 2 {SHORT_STEPS}); do srun -n1 true; done
"""


def t_short_steps():
    """Steps of `srun true`, whose task is often reaped before the sampler reads its
    /proc/<pid>/cgroup, are located through slurmstepd's own group (`step_<s>/slurm`, which
    the first step prints) and join the job's file: read from the step's cgroup (its memory
    includes slurmstepd's; /proc gives 0 for a step with no process left), never moving the
    running job's file aside (tests/cluster/recorder.rs steps_whose_task_is_already_gone_…)."""
    job = Job("short", SHORT_SCRIPT, ["--slurmwatch=1", "--mem=300M"])
    state = job.wait()
    out = job.output()
    m = re.search(r"^stepd 0::(\S+)$", out, re.M)
    measure("short_steps_stepd_cgroup", m.group(1) if m else out[-300:])
    check("short steps: slurmstepd's own group is its step's step_<s>/slurm",
          state == "COMPLETED" and m is not None and m.group(1).endswith("/step_0/slurm"), state + " " + out[-300:])
    aside = [n for n in os.listdir(SPOOL) if n.startswith(f"{job.id}.stale-")]
    _, steps = meta(job)
    names = {s["step"] for s in steps}
    memory = {str(i): [r["memory_usage_bytes"] for r in rows(job, str(i))] for i in range(SHORT_STEPS)}
    measure("short_steps_memory_usage_bytes", memory)
    check("short steps: each joined the job's file, read from its cgroup, none moved aside",
          not aside and all(str(i) in names for i in range(SHORT_STEPS))
          and all(len(v) >= 2 and all(b and b > 0 for b in v) for v in memory.values()),
          f"aside {aside}, steps {sorted(names)}, memory {memory}")


def main():
    t0 = time.time()
    for fn in (t_recorded_jobs, t_admin_comment, t_short_steps, t_stall_ledger):
        test(fn)
    measure("seconds_total", round(time.time() - t0, 1))
    results["done"] = True
    save()
    failed = [c["name"] for c in results["checks"] if not c["ok"]]
    print(f"{len(results['checks']) - len(failed)}/{len(results['checks'])} checks passed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
