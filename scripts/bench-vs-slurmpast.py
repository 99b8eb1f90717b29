#!/usr/bin/env python3
"""Times slurmwatch and slurmpast 0.9.0 on one generated history and compares their answers.

Run by scripts/bench-vs-slurmpast.sh, which installs slurmpast, builds slurmwatch and the
dataset, and lays out the fake Slurm commands; the environment it passes:

  SW          slurmwatch binary           SP        slurmpast entry point (venv)
  WORK        scratch directory           FAKEBIN   directory holding the fake `sacct` etc.
  FAKE_SACCT_DATA  the dataset            SINCE, UNTIL  the window (sacct `standard` times)
  RUNS        runs per command (median; default 5)

Each run gets its own FAKE_SACCT_LOG, so the time spent in the fake sacct (the union of
its processes' lifetimes: slurmpast runs up to eight at once) is known per run and
"after sacct returns" is the wall time minus that.
"""

import json
import os
import statistics
import subprocess
import sys
import time

SW, SP = os.environ["SW"], os.environ["SP"]
WORK, FAKEBIN = os.environ["WORK"], os.environ["FAKEBIN"]
SINCE, UNTIL = os.environ["SINCE"], os.environ["UNTIL"]
RUNS = int(os.environ.get("RUNS", "5"))
BOOT = time.CLOCK_BOOTTIME

spool = os.path.join(WORK, "empty-spool")
os.makedirs(spool, exist_ok=True)
window = ["--all-users", "-S", SINCE, "-E", UNTIL]
sw_common = window + ["--spool", spool, "--top", "100000", "--json"]
sp_common = window + ["--no-cache", "--no-logs", "-n", "0", "--json"]
COMMANDS = [
    ("slurmwatch history --json", [SW, "history"] + sw_common),
    ("slurmwatch sizing --json", [SW, "sizing"] + sw_common),
    ("slurmpast --overview --json", [SP, "--overview"] + sp_common),
    ("slurmpast --patterns --json", [SP, "--patterns"] + sp_common),
    ("slurmpast --sizing --json", [SP, "--sizing"] + sp_common),
]


def env(log):
    e = dict(os.environ)
    e.update(
        PATH=FAKEBIN + os.pathsep + e.get("PATH", ""),
        SLURMWATCH_SACCT=os.path.join(FAKEBIN, "sacct"),
        FAKE_SACCT_LOG=log,
        XDG_CACHE_HOME=os.path.join(WORK, "cache"),
        TZ=e.get("TZ", "UTC"),
    )
    return e


def sacct_calls(log):
    """[(start, end, cpu, args)] the fake logged."""
    out = []
    try:
        with open(log) as f:
            for line in f:
                s, e, c, args = (line.rstrip("\n").split(" ", 3) + [""])[:4]
                out.append((float(s), float(e), float(c), args))
    except FileNotFoundError:
        pass
    return out


def union(intervals):
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def run_once(argv, tag):
    log = os.path.join(WORK, "sacct-%s.log" % tag)
    if os.path.exists(log):
        os.remove(log)
    out_path = os.path.join(WORK, "%s.json" % tag)
    err_path = os.path.join(WORK, "%s.stderr" % tag)
    with open(out_path, "w") as out, open(err_path, "w") as err_f:
        t0 = time.clock_gettime(BOOT)
        p = subprocess.Popen(argv, stdout=out, stderr=err_f, env=env(log))
        _, status, ru = os.wait4(p.pid, 0)
        t1 = time.clock_gettime(BOOT)
        p.returncode = 0  # reaped by wait4
    with open(err_path, errors="replace") as f:
        err = f.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit("%s exited %d:\n%s" % (" ".join(argv), code, err))
    calls = sacct_calls(log)
    # Clip to the run: the fake's start is its own process start, to the 10-ms tick.
    spans = [(max(s, t0), min(e, t1)) for s, e, _, _ in calls]
    return {
        "wall": t1 - t0,
        "cpu": ru.ru_utime + ru.ru_stime,  # the tool and every child it waited for
        "sacct_wall": union(spans),
        "sacct_cpu": sum(c for _, _, c, _ in calls),
        "sacct_calls": len(calls),
        "args": [a for _, _, _, a in calls],
        "out": out_path,
    }


def replay_alone(calls_args):
    """The same sacct calls one after another, nothing else: the fake's own cost."""
    t0 = time.clock_gettime(BOOT)
    log = os.path.join(WORK, "sacct-replay.log")
    for a in calls_args:
        args = a.replace("^_", "\x1f").split(" ")
        subprocess.run([os.path.join(FAKEBIN, "sacct")] + args, stdout=subprocess.DEVNULL,
                       env=env(log), check=True)
    return time.clock_gettime(BOOT) - t0


def med(rs, key):
    return statistics.median(r[key] for r in rs)


results = {}
for name, argv in COMMANDS:
    tag = name.split()[0] + "-" + name.split()[1].lstrip("-")
    runs = [run_once(argv, tag) for _ in range(RUNS)]
    results[name] = runs
    alone = replay_alone(runs[0]["args"])
    results[name + " alone"] = alone
    print("  %-30s done (%d runs)" % (name, RUNS), file=sys.stderr)

print()
print("End to end on %s (10,000 jobs, 20,000 sacct rows; window %s .. %s); median of %d runs"
      % (os.path.basename(os.environ["FAKE_SACCT_DATA"]), SINCE, UNTIL, RUNS))
print()
hdr = ("command", "wall s", "CPU s", "sacct calls", "in sacct s", "after sacct s", "CPU-sacct s")
print("%-29s %7s %7s %11s %10s %13s %11s" % hdr)
summary = {}
for name, _ in COMMANDS:
    rs = results[name]
    after = statistics.median(r["wall"] - r["sacct_wall"] for r in rs)
    own_cpu = statistics.median(r["cpu"] - r["sacct_cpu"] for r in rs)
    summary[name] = (med(rs, "wall"), med(rs, "cpu"), after, own_cpu)
    print("%-29s %7.2f %7.2f %11d %10.2f %13.2f %11.2f" % (
        name, med(rs, "wall"), med(rs, "cpu"), rs[0]["sacct_calls"], med(rs, "sacct_wall"),
        after, own_cpu))
print()
print("  in sacct: wall time while at least one fake sacct process was alive (slurmpast runs")
print("  up to 8 at once); after sacct: wall minus that; CPU-sacct: the tool's own CPU (its")
print("  CPU and its children's, less what the fake sacct processes used).")
for name, _ in COMMANDS:
    alone = results[name + " alone"]
    print("  the same %2d sacct calls as %-28s one after another, alone: %.2f s" % (
        results[name][0]["sacct_calls"], name + ",", alone))

# --- what they said ------------------------------------------------------------------
def load(name):
    with open(results[name][0]["out"]) as f:
        return json.load(f)


swh, sws = load("slurmwatch history --json"), load("slurmwatch sizing --json")
spo, spp, sps = (load("slurmpast --overview --json"), load("slurmpast --patterns --json"),
                 load("slurmpast --sizing --json"))
S = spo["summary"]
sw_w = swh["workloads"]
fold = swh["below_fold"]
assert fold["workloads"] == 0, "slurmwatch folded workloads despite --top"


def tot(key):
    return sum(w[key] for w in sw_w)


sw_states = {}
for w in sw_w:
    for k, v in w["states"].items():
        sw_states[k] = sw_states.get(k, 0) + v
rows = [
    ("jobs", swh["window"]["jobs"], S["jobs"]),
    ("completed", tot("completed"), S["completed"]),
    ("failed (any non-COMPLETED end)", tot("failed"), S["failed"]),
    ("  of which TIMEOUT", tot("timeouts"), None),
    ("  of which OUT_OF_MEMORY", tot("out_of_memory"), None),
    ("cancelled", tot("cancelled"), S["cancelled"]),
    ("workloads (name pattern x user)", len(sw_w), len(spo["workloads"])),
    ("core-hours", round(tot("core_hours"), 1), round(S["core_hours_total"], 1)),
    ("GPU-hours", round(tot("gpu_hours"), 1), round(S["gpu_hours_total"], 1)),
    ("wasted GPU-hours", round(tot("wasted_gpu_hours"), 1),
     round(sum(w["wasted_gpu_hours"] for w in spo["workloads"]), 1)),
    ("hung runs / no-op jobs", tot("hung"), S["noop_jobs"]),
    ("cross-run patterns listed", len(swh["patterns"]), len(spp["findings"])),
]
# slurmpast lists a few findings of a kind and folds the rest into one "N more ..." finding
# (code `*-more`); counted out here, per kind, against slurmwatch's pattern codes.
KINDS = {"repeat-failure": "repeated_failure", "repeat-failure-more": "repeated_failure",
         "memory-search": "memory_hand_searched", "memory-more": "memory_hand_searched"}
sp_kinds = {}
for f in spp["findings"]:
    n = int(f["title"].split()[0]) if f["code"].endswith("-more") else 1
    k = KINDS.get(f["code"], f["code"])
    sp_kinds[k] = sp_kinds.get(k, 0) + n
sw_kinds = {}
for p in swh["patterns"]:
    sw_kinds[p["code"]] = sw_kinds.get(p["code"], 0) + 1
for k in sorted(set(sw_kinds) | set(sp_kinds)):
    rows.append(("  workloads with " + k, sw_kinds.get(k, 0), sp_kinds.get(k, 0)))


def pattern_codes(items, key):
    out = {}
    for p in items:
        out[p[key]] = out.get(p[key], 0) + 1
    return ", ".join("%s %d" % kv for kv in sorted(out.items())) or "none"


print()
print("What each said about the same 10,000 jobs")
print()
print("%-34s %14s %14s" % ("", "slurmwatch", "slurmpast"))
for label, a, b in rows:
    print("%-34s %14s %14s" % (label, a, "-" if b is None else b))
print("%-34s %s" % ("slurmwatch pattern codes", pattern_codes(swh["patterns"], "code")))
print("%-34s %s" % ("slurmpast finding codes", pattern_codes(spp["findings"], "code")))
print("%-34s %s" % ("slurmwatch --exclude", swh.get("exclude")))

# Top workloads by cost: slurmwatch ranks core-h + 32 x GPU-h; slurmpast's default sort is
# its own `cost`. Its JSON carries no user, so workloads are matched on name and counts.
print()
print("Top 5 workloads, each tool's own order")
sp_top = spo["workloads"][:5]
for i in range(5):
    a = sw_w[i]
    b = sp_top[i] if i < len(sp_top) else None
    print("  %d. %-10s %-4s %3d runs %3d failed %8.1f core-h %6.1f GPU-h | %-10s %3d runs %3d failed %8.1f core-h %6.1f GPU-h" % (
        i + 1, a["name"], a["user"], a["runs"], a["failed"], a["core_hours"], a["gpu_hours"],
        b["name"], b["runs"], b["failed"], b["core_hours"], b["gpu_hours"]))

# Sizing: verdict counts per flag.
def verdicts(workloads, flag_key="flag", verdict_key="verdict"):
    out = {}
    for w in workloads:
        for a in w.get("advice") or []:
            k = (a[flag_key], a[verdict_key])
            out[k] = out.get(k, 0) + 1
    return out


vw, vp = verdicts(sws["workloads"]), verdicts(sps["workloads"])
flags = sorted({f for f, _ in vw} | {f for f, _ in vp})
print()
print("Sizing verdicts over all workloads (slurmwatch %d, slurmpast %d)" % (
    len(sws["workloads"]), len(sps["workloads"])))
for f in flags:
    a = ", ".join("%s %d" % (v, n) for (ff, v), n in sorted(vw.items()) if ff == f) or "-"
    b = ", ".join("%s %d" % (v, n) for (ff, v), n in sorted(vp.items()) if ff == f) or "-"
    print("  %-16s slurmwatch: %-32s slurmpast: %s" % (f, a, b))

# One workload side by side: the first in slurmwatch's order, found in slurmpast's by its
# name and run count (slurmpast's JSON names no user).
w = sws["workloads"][0]
match = [x for x in sps["workloads"] if x["name"] == w["name"] and x["runs"] == w["runs"]]
print()
print("Advice for %s (user %s, %d runs)%s" % (
    w["name"], w["user"], w["runs"],
    "" if len(match) == 1 else " -- %d slurmpast workloads share name and run count; first shown" % len(match)))
sp_adv = {a["flag"]: a for a in (match[0]["advice"] if match else [])}
for a in w["advice"]:
    b = sp_adv.get(a["flag"])
    print("  %-16s slurmwatch: %-6s %-10s -> %-10s | slurmpast: %s" % (
        a["flag"], a["verdict"], a.get("current") or "-", a.get("suggestion") or "-",
        "-" if b is None else "%s %s -> %s" % (b["verdict"], b["requested"] or "-", b["suggestion"] or "-")))
for f, b in sp_adv.items():
    if f not in {a["flag"] for a in w["advice"]}:
        print("  %-16s slurmwatch: %-31s | slurmpast: %s %s -> %s" % (
            f, "(no such flag)", b["verdict"], b["requested"] or "-", b["suggestion"] or "-"))

print()
print("SUMMARY")
for name, (wall, cpu, after, own) in summary.items():
    print("  %-29s wall %5.2f s  CPU %5.2f s  after sacct returns %5.2f s (own CPU %5.2f s)" % (
        name, wall, cpu, after, own))
with open(os.path.join(WORK, "summary.json"), "w") as f:
    json.dump({k: dict(zip(("wall", "cpu", "after_sacct", "own_cpu"), v))
               for k, v in summary.items()}, f, indent=2)
