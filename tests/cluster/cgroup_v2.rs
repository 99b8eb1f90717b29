//! What only a VM tier guest (Slurm 24.11 or 26.05 on cgroup v2, the release's package
//! installed: scripts/vm/guest-run.sh) can show, never an expectation another cluster test
//! already holds: cgroup v2's files and PSI totals, 26.05's SLUID-named job directories, the
//! release's AdminComment store through the packaged EpilogSlurmctld, whether its sacctmgr
//! keeps a value's case, slurmstepd's own `step_<s>/slurm` group.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use slurmwatch_tests::*;

use crate::jobstats::python_decode;
use crate::recorder::{assert_working_set_peaks, WORKING_SET_SCRIPT};
use crate::slurmdbd::admin_comment_now;

// TCG is slow, and jobs queue behind each other on the guest's 2 CPUs.
const WAIT: Duration = Duration::from_secs(600);
const MIB: f64 = 1024.0 * 1024.0;
const CTLD_EPILOG_LOG: &str = "/var/log/slurm/ctld-epilog.log";

/// The rows of one series of the job's file (`job` or a step's name) as the `samples` view
/// names their columns, in time order.
fn rows(job: &Job, series: &str) -> Vec<Map<String, Value>> {
    let db = open_ro(job);
    let mut st = db
        .prepare("SELECT * FROM samples WHERE series = ?1 ORDER BY t_unix_ms")
        .unwrap();
    let names: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
    let rows = st
        .query_map([series], |r| {
            let mut m = Map::new();
            for (i, n) in names.iter().enumerate() {
                use rusqlite::types::ValueRef;
                let v = match r.get_ref(i)? {
                    ValueRef::Integer(x) => Value::from(x),
                    ValueRef::Real(x) => Value::from(x),
                    ValueRef::Text(t) => Value::from(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Null | ValueRef::Blob(_) => Value::Null,
                };
                m.insert(n.clone(), v);
            }
            Ok(m)
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn open_ro(job: &Job) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(
        spool_file(job.id),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap_or_else(|e| panic!("job {}: no readable file: {e}", job.id))
}

/// One step of the file's `steps` table.
#[derive(Debug)]
struct Step {
    step: String,
    ended: Option<i64>,
    exit_status: Option<i64>,
}

/// The file's `meta` table and its steps.
fn meta(job: &Job) -> (Map<String, Value>, Vec<Step>) {
    let db = open_ro(job);
    let mut m = Map::new();
    let mut st = db.prepare("SELECT key, value FROM meta").unwrap();
    for kv in st
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
    {
        let (k, v) = kv.unwrap();
        m.insert(k, Value::from(v));
    }
    let mut st = db
        .prepare("SELECT step, ended_unix_ms, exit_status FROM steps")
        .unwrap();
    let steps = st
        .query_map([], |r| {
            Ok(Step {
                step: r.get(0)?,
                ended: r.get(1)?,
                exit_status: r.get(2)?,
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (m, steps)
}

fn num(r: &Map<String, Value>, k: &str) -> Option<f64> {
    r.get(k).and_then(Value::as_f64)
}

/// The largest recorded working set (the row's maximum where the sampler kept one).
fn peak_working_set(rs: &[Map<String, Value>]) -> f64 {
    rs.iter()
        .map(|r| {
            num(r, "memory_working_set_max_bytes")
                .filter(|v| *v != 0.0)
                .or_else(|| num(r, "memory_working_set_bytes"))
                .unwrap_or(0.0)
        })
        .fold(0.0, f64::max)
}

fn max_of(rs: &[Map<String, Value>], col: &str) -> f64 {
    rs.iter().filter_map(|r| num(r, col)).fold(0.0, f64::max)
}

/// `slurmwatch ARGS` as `user`, which must print JSON.
fn cli_json_as(user: &str, args: &[&str]) -> Value {
    let o = Command::new("runuser")
        .args(["-u", user, "--"])
        .arg(slurmwatch_bin())
        .args(args)
        .output()
        .expect("run slurmwatch");
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| {
        panic!(
            "slurmwatch {args:?}: exit {:?}, not JSON ({e}): {} {}",
            o.status.code(),
            stdout(&o),
            stderr(&o)
        )
    })
}

/// The job owner's `report --json`, once it says the summary is stored (at most 60 s).
fn report(job: &Job) -> Value {
    let id = job.id.to_string();
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let r = cli_json_as(USER1, &["report", &id, "--json"]);
        if r["summary_stored"] == true || Instant::now() > end {
            return r;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The job's directory in the unified tree from the `cgroup PATH` line its script printed.
fn printed_cgroup_dir(out: &str) -> String {
    let path = out
        .lines()
        .find_map(|l| l.strip_prefix("cgroup "))
        .unwrap_or_else(|| panic!("the job printed no cgroup path: {out:?}"));
    let cut = path.find("/step_").unwrap_or(path.len());
    format!("/sys/fs/cgroup{}", &path[..cut])
}

/// The number after `key ` on a line of the job's output.
fn printed(out: &str, key: &str) -> Option<String> {
    out.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .map(|v| v.trim().to_string())
}

const CPU_SCRIPT: &str = r#"
burn() { local end=$((SECONDS + $1)); while ((SECONDS < end)); do :; done; }
burn 6 & burn 6 &
for i in $(seq 60); do ( i=0; while ((i < 3000)); do ((i++)); done ) ; done
wait
times
"#;

/// A job with a 200 MiB then 600 MiB working set and 1 GiB of page cache under --mem=2500M,
/// and beside it a 2-core job: the memory job's peaks are the recorder test's (one job for
/// both in the guests: the test's TCG minute once), its file holds what cgroup v2 gives (the
/// kernel's memory.peak, page cache, every PSI column, the job's and the batch step's
/// limits), its directory is the release's (26.05: the SLUID), the owner's report joins it
/// with this release's sacct; then both jobs' summaries in slurmdbd (`admin_comment`).
#[cluster_test(Phase::Guest)]
fn a_recorded_job_keeps_cgroup_v2_memory_psi_and_limits_and_its_summary_reaches_slurmdbd() {
    let _p = shared_plugstack();
    // Submitted together: the 2-core job runs while the memory job's summary is stored.
    let mem = Submit::new("memory", WORKING_SET_SCRIPT)
        .arg("--slurmwatch=5")
        .arg("--mem=2500M")
        .user(USER1)
        .submit();
    let cpu = Submit::new("cpu", CPU_SCRIPT)
        .arg("--slurmwatch=2")
        .arg("--cpus-per-task=2")
        .arg("--mem=500M")
        .user(USER1)
        .submit();
    let state = mem.wait(WAIT).state;
    assert_eq!(state, "COMPLETED", "{}", mem.output());
    cpu.wait(WAIT);
    assert_working_set_peaks(&mem);
    memory_checks(&mem);
    memory_report_checks(&mem);
    admin_comment_checks(&mem);
    two_core_summary_and_sacctmgr_case(&cpu);
}

fn memory_checks(job: &Job) {
    let out = job.output();
    let baseline: f64 = printed(&out, "baseline")
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("no baseline: {out}"));
    let (m, steps) = meta(job);
    assert_eq!(m.get("source"), Some(&Value::from("cgroup_v2")), "{m:?}");
    let rs = rows(job, "job");
    let lifetime = max_of(&rs, "memory_lifetime_peak_bytes");
    let kernel: f64 = printed(&out, "kernel_peak")
        .and_then(|k| k.parse().ok())
        .unwrap_or_else(|| panic!("no kernel_peak: {out}"));
    assert!(
        (lifetime - kernel).abs() / kernel <= 0.02,
        "lifetime peak {:.1} vs the job cgroup's memory.peak {:.1} MiB (baseline {:.1} MiB)",
        lifetime / MIB,
        kernel / MIB,
        baseline / MIB
    );
    assert!(
        rs.iter().any(|r| r["kind"] == "end"),
        "no end row in {}",
        rs.len()
    );
    let cache = max_of(&rs, "memory_cache_bytes");
    assert!(cache > 900.0 * MIB, "page cache {:.1} MiB", cache / MIB);
    for kind in [
        "cpu_some",
        "memory_some",
        "memory_full",
        "io_some",
        "io_full",
    ] {
        let col = format!("pressure_{kind}_avg10_percent");
        let n = rs.iter().filter(|r| num(r, &col).is_some()).count();
        assert!(n + 1 >= rs.len() && n > 0, "{col}: {n}/{} rows", rs.len());
    }
    let batch = steps.iter().find(|s| s.step == "batch");
    assert!(
        batch.is_some_and(|b| b.exit_status == Some(0) && b.ended.is_some_and(|e| e != 0)),
        "a batch step with exit status 0: {steps:?}"
    );
    let limits = |rs: &[Map<String, Value>]| -> Vec<Option<f64>> {
        rs.iter().map(|r| num(r, "memory_limit_bytes")).collect()
    };
    let brs = rows(job, "batch");
    assert!(brs.len() >= 2, "the batch step's own rows: {}", brs.len());
    let bl = limits(&brs);
    assert!(
        bl.contains(&Some(2500.0 * MIB)),
        "the step's memory limit (step_batch/user/memory.max): {bl:?}"
    );
    let jl = limits(&rs);
    assert!(
        jl.contains(&Some(2500.0 * MIB)),
        "the job's memory limit: {jl:?}"
    );
    // 26.05 names the job's cgroup by its SLUID, not job_<id>.
    let cg = printed_cgroup_dir(&out);
    let base = cg.rsplit('/').next().unwrap_or_default();
    let sluid = printed(&out, "sluid").unwrap_or_default();
    if slurm_release().as_str() >= "26.05" {
        assert!(
            sluid != "none" && base == sluid && lifetime > 0.0,
            "{cg} (SLURM_JOB_SLUID {sluid}), lifetime peak {lifetime}"
        );
    } else {
        assert_eq!(base, format!("job_{}", job.id), "{cg}");
    }
}

/// The owner's report joined with this release's sacct, and without it (`--no-sacct`).
fn memory_report_checks(job: &Job) {
    let rs = rows(job, "job");
    let peak_ws = peak_working_set(&rs);
    let lifetime = max_of(&rs, "memory_lifetime_peak_bytes");
    let r = report(job);
    assert_eq!(r["source"], "recorded_file", "{r:#}");
    assert_eq!(r["summary_stored"], true, "{r:#}");
    let sj = &r["sacct"]["job"];
    let id = sj
        .get("JobID")
        .or_else(|| sj.get("JobIDRaw"))
        .map(|v| {
            v.as_str()
                .map(String::from)
                .unwrap_or_else(|| v.to_string())
        })
        .unwrap_or_default();
    assert!(
        id.starts_with(&job.id.to_string()),
        "the sacct job record: {sj}"
    );
    assert_eq!(r["state"], "COMPLETED");
    let rm = &r["memory"];
    let got_ws = rm["peak_working_set_bytes"].as_f64().unwrap_or(0.0);
    let got_life = rm["lifetime_peak_bytes"].as_f64().unwrap_or(0.0);
    assert!(
        (got_ws - peak_ws).abs() <= 0.01 * peak_ws
            && (got_life - lifetime).abs() <= 0.01 * lifetime,
        "report {got_ws} / {got_life}, file {peak_ws} / {lifetime}"
    );
    let steps: Vec<&Value> = r["steps"].as_array().into_iter().flatten().collect();
    assert!(
        steps.iter().any(|s| s["step"] == "batch"),
        "the batch step: {steps:?}"
    );
    let id = job.id.to_string();
    let nos = cli_json_as(USER1, &["report", &id, "--json", "--no-sacct"]);
    let bst = nos["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["step"] == "batch"))
        .and_then(Value::as_object)
        .unwrap_or_else(|| panic!("--no-sacct lists no batch step: {nos:#}"));
    let any = |f: &dyn Fn(&str) -> bool| bst.iter().any(|(k, v)| f(k) && !v.is_null());
    assert!(
        any(&|k| k.contains("cpu")) && any(&|k| k.contains("peak") || k.contains("memory")),
        "--no-sacct: the batch step's CPU and peak from the file: {bst:?}"
    );
}

/// The job's AdminComment once `ok` holds it, else the last one read after `timeout`.
fn admin_comment_when(job: &Job, ok: impl Fn(&str) -> bool, timeout: Duration) -> String {
    let end = Instant::now() + timeout;
    loop {
        let c = admin_comment_now(job);
        if ok(&c) || Instant::now() > end {
            return c;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn node() -> String {
    stdout(&run("hostname", &["-s"])).trim().to_string()
}

fn ctld_epilog_log() -> String {
    let t = std::fs::read_to_string(CTLD_EPILOG_LOG).unwrap_or_else(|e| format!("{e}"));
    let mut from = t.len().saturating_sub(1500);
    while !t.is_char_boundary(from) {
        from += 1;
    }
    t[from..].to_string()
}

/// docs/admin.md, "Every job's summary in slurmdbd": the packaged EpilogSlurmctld stores each
/// recorded job's summary as jobstats' JS1: AdminComment, case intact, through the store
/// scripts/vm/test.sh gave this release (24.11: the package's slurmwatch-dbd-comment; 26.05:
/// a site without it, this release's sacctmgr); it holds jobstats' keys with the
/// recording's figures, and the report reads it without the file.
fn admin_comment_checks(mem: &Job) {
    let c = admin_comment_when(mem, |c| c.starts_with("JS1:"), Duration::from_secs(90));
    let log = ctld_epilog_log();
    assert!(c.starts_with("JS1:H4sI"), "{c:.60}; ctld-epilog.log: {log}");
    let store = std::fs::read_to_string("/share/comment-store").unwrap_or_default();
    let dbd_comment = "/usr/bin/slurmwatch-dbd-comment";
    match slurm_release().as_str() {
        "24.11" => {
            assert_eq!(store.trim(), "package");
            let o = run("dpkg", &["-S", dbd_comment]);
            let owner = stdout(&o).split(':').next().unwrap_or_default().to_string();
            assert!(
                owner == "slurmwatch" && !log.contains("SW1"),
                "owner {owner:?}; {log}"
            );
        }
        _ => {
            assert_eq!(store.trim(), "sacctmgr");
            let present = std::path::Path::new(dbd_comment).exists();
            assert!(!present && !log.contains("SW1"), "present {present}; {log}");
        }
    }
    let d = python_decode(&c);
    let id = mem.id.to_string();
    let r = cli_json_as(USER1, &["report", &id, "--json", "--no-log"]);
    let node = node();
    let n = &d["nodes"][&node];
    let (rc, rm) = (&r["cpu"], &r["memory"]);
    let alloc = crate::slurmdbd::sacct_job_field(mem, "AllocCPUS");
    let nodes: Vec<&String> = d["nodes"]
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert!(
        nodes == [&node]
            && n["cpus"].as_u64().map(|c| c.to_string()) == Some(alloc.clone())
            // As numbers: the report's 1.0 is jobstats' 1.
            && n["cpus"].as_f64() == rc["cores_allocated"].as_f64(),
        "nodes {nodes:?}, cpus {}, sacct AllocCPUS {alloc}, report {}",
        n["cpus"],
        rc["cores_allocated"]
    );
    let peak = rm["peak_working_set_bytes"].as_f64().unwrap_or(0.0);
    let ws = peak_working_set(&rows(mem, "job"));
    assert!(
        n["used_memory"].as_f64() == Some(peak)
            && (peak - ws).abs() <= 0.01 * ws
            && peak > 600.0 * MIB,
        "used_memory {}, report {peak}, file rows {ws}",
        n["used_memory"]
    );
    assert!(
        n["total_memory"].as_f64() == Some(2500.0 * MIB)
            && rm["limit_bytes"].as_f64() == Some(2500.0 * MIB),
        "{}, report {}",
        n["total_memory"],
        rm["limit_bytes"]
    );
    let total = d["total_time"].as_f64();
    let cpu_s = rc["usage_seconds_total"].as_f64();
    // The job sleeps 12 s.
    assert!(
        total.is_some()
            && total == r["elapsed_seconds"].as_f64()
            && total >= Some(12.0)
            && cpu_s
                .is_some_and(|s| n["total_time"].as_f64() == Some((s * 1000.0).round() / 1000.0)),
        "total_time {total:?} (report elapsed {}), node {} (report CPU {cpu_s:?})",
        r["elapsed_seconds"],
        n["total_time"]
    );
    report_from_the_summary_alone(mem, peak);
}

/// The report with the job's file moved away: its peak from the AdminComment.
fn report_from_the_summary_alone(job: &Job, peak: f64) {
    struct Away(std::path::PathBuf, std::path::PathBuf);
    impl Drop for Away {
        fn drop(&mut self) {
            let _ = std::fs::rename(&self.1, &self.0);
        }
    }
    let file = spool_file(job.id);
    let away = Away(
        file.clone(),
        format!("/var/tmp/swvm-away-{}.sqlite", job.id).into(),
    );
    std::fs::rename(&file, &away.1).unwrap();
    let a = cli_json_as(
        USER1,
        &["report", &job.id.to_string(), "--json", "--no-log"],
    );
    drop(away);
    assert!(
        a["source"] == "slurmdbd_summary"
            && a["memory"]["peak_working_set_bytes"].as_f64() == Some(peak),
        "source {}, peak {} (file's {peak})",
        a["source"],
        a["memory"]["peak_working_set_bytes"]
    );
}

/// What this release's `sacctmgr ... set AdminComment=` does to the value's case (docs/admin.md,
/// "Slurm 22.05 and the case of the value"; 22.05.8 lowercases it).
fn sacctmgr_keeps_case(release: &str) -> Option<bool> {
    match release {
        "24.11" | "26.05" => Some(true),
        _ => None,
    }
}

/// The 2-core job's summary says 2 cores; then this release's sacctmgr stores a value over
/// it, its case kept or lowercased as docs/admin.md says.
fn two_core_summary_and_sacctmgr_case(cpu: &Job) {
    let cc = admin_comment_when(cpu, |c| c.starts_with("JS1:"), Duration::from_secs(90));
    assert!(cc.starts_with("JS1:H4sI"), "{cc:.40}");
    let dc = python_decode(&cc);
    let cpus = dc["nodes"][node()]["cpus"].as_f64();
    assert_eq!(cpus, Some(2.0), "{}", dc["nodes"]);
    let value = "JS1:AbCdEf+/=";
    let o = run(
        "sacctmgr",
        &[
            "-i",
            "modify",
            "job",
            "where",
            &format!("jobid={}", cpu.id),
            "set",
            &format!("AdminComment={value}"),
        ],
    );
    let back = admin_comment_when(
        cpu,
        |c| c.to_lowercase() == value.to_lowercase(),
        Duration::from_secs(30),
    );
    let release = slurm_release();
    assert!(
        back.to_lowercase() == value.to_lowercase()
            && Some(back == value) == sacctmgr_keeps_case(&release),
        "Slurm {release}: stored {value:?}, read back {back:?} (sacctmgr exit {:?}: {}{})",
        o.status.code(),
        stdout(&o),
        stderr(&o)
    );
}

const OOM_SCRIPT: &str = r#"
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
"#;

/// --mem=300M and a 500 MiB allocation: the kill is counted from memory.events in the job's
/// rows and the batch step's, whose exit status is recorded as a failure.
#[cluster_test(Phase::Guest)]
fn an_oom_kill_is_counted_from_memory_events_in_the_job_and_its_batch_step() {
    let _p = shared_plugstack();
    let job = Submit::new("oom", OOM_SCRIPT)
        .arg("--slurmwatch=1")
        .arg("--mem=300M")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "OUT_OF_MEMORY", "{}", job.output());
    let kills = max_of(&rows(&job, "job"), "memory_oom_kills");
    assert!(kills >= 1.0, "job rows' OOM kills: {kills}");
    let (_, steps) = meta(&job);
    let batch = steps
        .iter()
        .find(|s| s.step == "batch")
        .unwrap_or_else(|| panic!("no batch step: {steps:?}"));
    let brs = rows(&job, "batch");
    let bk: Vec<Option<f64>> = brs.iter().map(|r| num(r, "memory_oom_kills")).collect();
    assert!(
        max_of(&brs, "memory_oom_kills") >= 1.0,
        "batch rows' OOM kills: {bk:?}"
    );
    assert!(
        !matches!(batch.exit_status, None | Some(0)),
        "the batch step's exit status: {batch:?}"
    );
}

const SHORT_STEPS: usize = 12;

/// Steps of `srun true`, whose task is often reaped before the sampler reads its
/// /proc/<pid>/cgroup, are located through slurmstepd's own group (`step_<s>/slurm`, which
/// the first step prints) and join the job's file: read from the step's cgroup (its memory
/// includes slurmstepd's; /proc gives 0 for a step with no process left), never moving the
/// running job's file aside (recorder.rs steps_whose_task_is_already_gone_…).
#[cluster_test(Phase::Guest)]
fn short_steps_join_the_file_through_slurmstepds_own_group() {
    let _p = shared_plugstack();
    let script = format!(
        "srun -n1 bash -c 'echo \"stepd $(grep ^0:: /proc/$PPID/cgroup)\"'\n\
         for i in $(seq 2 {SHORT_STEPS}); do srun -n1 true; done\n"
    );
    let job = Submit::new("short", &script)
        .arg("--slurmwatch=1")
        .arg("--mem=300M")
        .user(USER1)
        .submit();
    let state = job.wait(WAIT).state;
    let out = job.output();
    let stepd = out.lines().find_map(|l| l.strip_prefix("stepd 0::"));
    assert!(
        state == "COMPLETED" && stepd.is_some_and(|g| g.ends_with("/step_0/slurm")),
        "{state} {out}"
    );
    let prefix = format!("{}.stale-", job.id);
    let aside: Vec<String> = std::fs::read_dir(SPOOL)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    let (_, steps) = meta(&job);
    let names: Vec<&str> = steps.iter().map(|s| s.step.as_str()).collect();
    let memory: Vec<(usize, Vec<Option<f64>>)> = (0..SHORT_STEPS)
        .map(|i| {
            let rs = rows(&job, &i.to_string());
            (i, rs.iter().map(|r| num(r, "memory_usage_bytes")).collect())
        })
        .collect();
    assert!(
        aside.is_empty()
            && (0..SHORT_STEPS).all(|i| names.contains(&i.to_string().as_str()))
            && memory
                .iter()
                .all(|(_, v)| v.len() >= 2 && v.iter().all(|b| b.is_some_and(|b| b > 0.0))),
        "aside {aside:?}, steps {names:?}, memory {memory:?}"
    );
}

const STALL_SCRIPT: &str = r#"
echo "cgroup $(grep ^0:: /proc/self/cgroup | cut -d: -f3)"
for i in 1 2 3 4; do ( t=$(date +%s); while [ $(( $(date +%s) - t )) -lt 12 ]; do :; done ) & done
wait
"#;

fn now_ms() -> f64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    d.as_secs_f64() * 1000.0
}

/// PSI's stall totals (issue 39's ledger) on cgroup v2: four busy loops on the job's one
/// core keep some task always waiting for CPU. The recorded totals bracket the kernel's own
/// counter read mid-job (each row's reading and its timestamp are a few ms apart, and the
/// counter climbs at up to 1 µs per µs then: 50 ms of slack, plus the file's ms rounding), and
/// the report's ledger is exactly the difference of the first and last rows.
#[cluster_test(Phase::Guest)]
fn stall_totals_bracket_the_kernels_cpu_pressure_and_the_ledger_is_their_difference() {
    let _p = shared_plugstack();
    let job = Submit::new("stalls", STALL_SCRIPT)
        .arg("--slurmwatch=1")
        .arg("-c")
        .arg("1")
        .arg("--mem=200M")
        .user(USER1)
        .submit();
    job.wait_running(WAIT);
    let end = Instant::now() + Duration::from_secs(60);
    while !job.output().contains("cgroup ") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(500));
    }
    let pressure = std::path::Path::new(&printed_cgroup_dir(&job.output())).join("cpu.pressure");
    let mut kernel = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_secs(2));
        let text = std::fs::read_to_string(&pressure).unwrap();
        let total = text
            .lines()
            .find(|l| l.starts_with("some "))
            .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("total=")))
            .and_then(|t| t.parse::<f64>().ok());
        kernel.push((now_ms(), total));
    }
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    let all = rows(&job, "job");
    assert!(
        all.iter().all(
            |r| ["cpu", "memory", "io"]
                .iter()
                .all(|res| ["some", "full"].iter().all(|k| num(
                    r,
                    &format!("pressure_{res}_{k}_total_usec")
                )
                .is_some()))
        ),
        "every row has the cpu, memory and io totals: {:?}",
        all.last()
    );
    let col = "pressure_cpu_some_total_usec";
    let rs: Vec<(f64, f64)> = all
        .iter()
        .filter_map(|r| Some((num(r, "t_unix_ms")?, num(r, col)?)))
        .collect();
    assert!(!rs.is_empty(), "no row has {col}");
    let slack = 50_000.0 + 500.0;
    let brackets: Vec<_> = kernel
        .iter()
        .map(|&(t, k)| {
            let before = rs.iter().rev().find(|r| r.0 <= t).map(|r| r.1);
            let after = rs.iter().find(|r| r.0 >= t).map(|r| r.1);
            (before, k, after)
        })
        .collect();
    assert!(
        brackets
            .iter()
            .all(|b| matches!(b, (Some(b), Some(k), Some(a))
            if b - slack <= *k && *k <= a + slack)),
        "the kernel's cpu.pressure total mid-job between the rows around it: {brackets:?}"
    );
    let r = report(&job);
    let l = &r["ledger"];
    let exact = (rs[rs.len() - 1].1 - rs[0].1) / 1e6;
    let got = l["stall_seconds"]["cpu_some"].as_f64();
    assert!(
        got.is_some_and(|g| (g - exact).abs() < 1e-6),
        "{got:?} vs {exact}"
    );
    let share = l["stall_share_of_wall"]["cpu_some"].as_f64();
    assert!(
        share.is_some_and(|s| s >= 0.5) && l["stalls_unavailable"].is_null(),
        "four busy loops on one core wait for CPU most of the wall time: {l:#}"
    );
}
