#!/usr/bin/env python3
"""A fake `sacct` over one generated history, for scripts/bench-vs-slurmpast.sh.

Reads the dataset named by FAKE_SACCT_DATA (JSON from
`cargo run --release -p slurmwatch-core --example history_fixture`: fields + rows, a job
line followed by its steps) and answers the options both slurmwatch and slurmpast 0.9.0
give it, as Slurm 22.05 would:

  --helpformat                     the field names it knows (every Slurm 22.05 field the two
                                   tools ask for; the dataset's own plus those it leaves blank)
  -o/--format=F1,F2[%W]            columns, case-insensitive; a known field with no data prints
                                   empty; an unknown one is refused as sacct does
  -p/--parsable, -P/--parsable2    trailing delimiter or not;  --delimiter=X (default `|`)
  -n/--noheader, -X/--allocations, -D/--duplicates (accepted, no requeues here)
  -j/--jobs=ID,...                 those jobs whole (no time filter, as sacct does with -j)
  -S/--starttime, -E/--endtime     jobs that ran in [S, E) (standard time format, `now`)
  -u/--user=U,..., -a/--allusers, --state=S,..., -r/--partition=P,...

FAKE_SACCT_LOG, when set, gets one line per call: start and end (CLOCK_BOOTTIME seconds; the
start is the process's own, to the 10-ms tick, so interpreter start-up counts), the
process's CPU seconds (user + system) and the arguments, so a caller can tell how long it
spent waiting on "sacct".
"""

import json
import os
import sys
import time



def _started():
    """When this process started, on CLOCK_BOOTTIME (interpreter start-up included)."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.clock_gettime(time.CLOCK_BOOTTIME)


T_START = _started()

# Every field either tool may ask for that the dataset does not carry: printed blank.
KNOWN_BLANK = """
Group Account Cluster Partition QOS AssocID WCKey State ExitCode DerivedExitCode Reason Flags
Submit Eligible Start End Elapsed ElapsedRaw Timelimit TimelimitRaw Reserved Planned Suspended
ReqMem ReqCPUS ReqNodes ReqTRES Constraints ReqCPUFreqMin ReqCPUFreqMax ReqCPUFreqGov
AllocTRES AllocCPUS AllocNodes NCPUS NNodes NTasks NodeList TotalCPU UserCPU SystemCPU
CPUTime CPUTimeRAW AveCPU MinCPU MinCPUNode MinCPUTask AveCPUFreq MaxRSS MaxRSSNode MaxRSSTask
AveRSS MaxVMSize MaxVMSizeNode AveVMSize MaxPages MaxPagesNode AvePages MaxDiskRead
MaxDiskReadNode AveDiskRead MaxDiskWrite MaxDiskWriteNode AveDiskWrite TRESUsageInTot
TRESUsageOutTot TRESUsageInMax TRESUsageInMaxNode TRESUsageInAve ConsumedEnergy ReqGRES
AllocGRES Priority Reservation WorkDir Comment AdminComment Layout SubmitLine JobID JobIDRaw
JobName User UID GID
""".split()
SEP = "\x1f"
# Not in Slurm 22.05: refused, so each tool's own fallback for an older sacct is exercised.
NOT_IN_2205 = {"stdout", "stderr"}


def die(msg, code=1):
    sys.stderr.write("sacct: " + msg + "\n")
    sys.exit(code)


def parse_time(s):
    if s in ("now", "Unknown", ""):
        return time.time()
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"):
        try:
            return time.mktime(time.strptime(s, fmt))
        except ValueError:
            pass
    if s.startswith("now-"):
        n, unit = int("".join(c for c in s[4:] if c.isdigit())), s[4:].lstrip("0123456789")
        mult = {"days": 86400, "day": 86400, "hours": 3600, "weeks": 604800}.get(unit, 86400)
        return time.time() - n * mult
    die("Invalid time specification: %s" % s)


def load(path):
    """(fields, rows) of the dataset. Parsing 8 MB of JSON costs more than a real sacct's
    formatting, so the first call leaves a flat copy beside it (one row a line, split on the
    unit separator) that later calls read instead."""
    flat = path + ".flat"
    try:
        if os.stat(flat).st_mtime >= os.stat(path).st_mtime:
            with open(flat, encoding="utf-8") as f:
                lines = f.read().split("\n")
            return lines[0].split(SEP), (line.split(SEP) for line in lines[1:] if line)
    except OSError:
        pass
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    tmp = "%s.%d" % (flat, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(SEP.join(data["fields"]) + "\n")
        for row in data["rows"]:
            f.write(SEP.join(row) + "\n")
    os.replace(tmp, flat)
    return data["fields"], data["rows"]


def main(argv):
    opts = {"fmt": None, "delim": "|", "trailing": False, "parsable": False, "header": True,
            "alloc": False, "jobs": None, "S": None, "E": None, "users": None, "all": False,
            "states": None, "parts": None}
    valued = {"-o": "fmt", "--format": "fmt", "--delimiter": "delim", "-j": "jobs",
              "--jobs": "jobs", "-S": "S", "--starttime": "S", "-E": "E", "--endtime": "E",
              "-u": "users", "--user": "users", "--state": "states", "-s": "states",
              "-r": "parts", "--partition": "parts"}
    i = 0
    while i < len(argv):
        a = argv[i]
        key, val = a, None
        if a.startswith("--") and "=" in a:
            key, val = a.split("=", 1)
        if key == "--helpformat" or key == "-e":
            names = sorted(set(KNOWN_BLANK), key=str.lower)
            for at in range(0, len(names), 6):
                print(" ".join("%-19s" % n for n in names[at:at + 6]).rstrip())
            return 0
        if key in valued:
            if val is None:
                i += 1
                if i >= len(argv):
                    die("option %s needs a value" % key)
                val = argv[i]
            opts[valued[key]] = val
        elif key in ("-p", "--parsable"):
            opts["parsable"], opts["trailing"] = True, True
        elif key in ("-P", "--parsable2"):
            opts["parsable"], opts["trailing"] = True, False
        elif key in ("-n", "--noheader"):
            opts["header"] = False
        elif key in ("-X", "--allocations"):
            opts["alloc"] = True
        elif key in ("-a", "--allusers"):
            opts["all"] = True
        elif key in ("-D", "--duplicates"):
            pass
        else:
            die("unrecognized option '%s'" % a)
        i += 1
    if not opts["parsable"]:
        die("this fake prints only --parsable/--parsable2 output")

    fields, rows = load(os.environ["FAKE_SACCT_DATA"])
    col = {name.lower(): at for at, name in enumerate(fields)}
    known = {n.lower() for n in KNOWN_BLANK} | set(col)
    wanted = []
    for name in (opts["fmt"] or "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode").split(","):
        name = name.split("%")[0].strip()
        if not name:
            continue
        if name.lower() not in known or name.lower() in NOT_IN_2205:
            die("Invalid field requested: \"%s\"" % name)
        wanted.append((name, col.get(name.lower())))

    jobs_wanted = None
    if opts["jobs"] is not None:
        jobs_wanted = {j.strip() for j in opts["jobs"].split(",") if j.strip()}
    users = None if opts["all"] or not opts["users"] else set(opts["users"].split(","))
    states = None if not opts["states"] else {s.upper() for s in opts["states"].split(",")}
    parts = None if not opts["parts"] else set(opts["parts"].split(","))
    # Compared as text: the dataset's times are sacct's `standard` format in this TZ.
    iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))  # noqa: E731
    since = until = None
    if jobs_wanted is None:
        since = iso(parse_time(opts["S"])) if opts["S"] else None
        until = iso(parse_time(opts["E"])) if opts["E"] else None
    c_id, c_user, c_state = col["jobidraw"], col["user"], col["state"]
    c_start, c_end, c_part = col["start"], col["end"], col["partition"]

    out = []
    d = opts["delim"]
    tail = d if opts["trailing"] else ""
    if opts["header"]:
        out.append(d.join(n for n, _ in wanted) + tail)
    keep = False
    for row in rows:
        rid = row[c_id]
        is_job = "." not in rid
        if is_job:
            keep = True
            if jobs_wanted is not None and rid not in jobs_wanted:
                keep = False
            elif users is not None and row[c_user] not in users:
                keep = False
            elif states is not None and row[c_state] not in states:
                keep = False
            elif parts is not None and row[c_part] not in parts:
                keep = False
            elif since is not None or until is not None:
                start, end = row[c_start], row[c_end]
                if (until is not None and start >= until) or (since is not None and end < since):
                    keep = False
        if not keep or (opts["alloc"] and not is_job):
            continue
        out.append(d.join("" if at is None else row[at] for _, at in wanted) + tail)
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    log = os.environ.get("FAKE_SACCT_LOG")
    if log:
        t = os.times()
        with open(log, "a") as f:
            end = time.clock_gettime(time.CLOCK_BOOTTIME)
            f.write("%.6f %.6f %.6f %s\n" % (T_START, end, t.user + t.system,
                                              " ".join(sys.argv[1:]).replace("\x1f", "^_")))
    sys.exit(code)
