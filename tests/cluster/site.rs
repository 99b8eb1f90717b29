//! Issue 36, part 1: the chain on the site topology (`scripts/site.sh up`): a controller `ctl`,
//! a login host `login` and compute hosts `c1`, `c2`, each its own network, mount and UTS
//! namespaces, real daemons, slurmwatch from the .deb configured as docs/admin.md says (spool
//! `/var/lib/slurmwatch/spool/%n` on the compute hosts only, archive `/shared/slurmwatch/%u`
//! seen by c1, c2 and login). These tests run ON the login host (`scripts/site.sh on login
//! cargo test … site::`): sbatch, squeue, sacct and the packaged `slurmwatch` here are the
//! login host's; what a compute host or the controller says is asked there with
//! `scripts/site.sh on HOST …`. Ground truth: what each job allocated, and each recording read
//! on its own compute host.

use serde_json::Value;
use slurmwatch_tests::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The packaged command (the .deb's, on every host's shared /usr).
const SW: &str = "/usr/bin/slurmwatch";
const SITE_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/site.sh");
/// The spool's base on a compute host (`spool=/var/lib/slurmwatch/spool/%n`).
const SPOOL_BASE: &str = "/var/lib/slurmwatch/spool";
/// The archive's base (`archive=/shared/slurmwatch/%u`), on c1, c2 and login.
const ARCHIVE_BASE: &str = "/shared/slurmwatch";
const CTLD_LOG: &str = "/var/log/slurm/ctld-epilog.log";
/// Prometheus on ctl.
const PROM: &str = "http://10.77.0.10:9090";
const WAIT: Duration = Duration::from_secs(300);
const MIB: f64 = 1048576.0;

/// Every test runs on the login host, which has no spool at all.
fn on_login() {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    assert_eq!(
        h.trim(),
        "login",
        "run the site tests on the login host: scripts/site.sh on login cargo test --test cluster -- --ignored site::"
    );
    assert!(!Path::new(SPOOL_BASE).exists(), "login has a spool");
}

/// A compute host's node service stopped (its endpoint down) until [`EndpointDown::back_up`],
/// or the drop (a failed test leaves no host without its endpoint). Started once only: a
/// second start would fail to bind and leave a dead pid in the service's pid file.
struct EndpointDown {
    host: &'static str,
    down: bool,
}

impl EndpointDown {
    fn new(host: &'static str) -> EndpointDown {
        service(host, "stop");
        EndpointDown { host, down: true }
    }

    fn back_up(&mut self) {
        if std::mem::take(&mut self.down) {
            service(self.host, "start");
        }
    }
}

impl Drop for EndpointDown {
    fn drop(&mut self) {
        self.back_up();
    }
}

/// `CMD` on `host` (scripts/site.sh on).
fn on(host: &str, args: &[&str]) -> Output {
    Command::new(SITE_SH)
        .arg("on")
        .arg(host)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {SITE_SH}: {e}"))
}

/// `CMD` on `host`, which must exit 0: its stdout.
fn on_ok(host: &str, args: &[&str]) -> String {
    let o = on(host, args);
    assert!(
        o.status.success(),
        "on {host}: {args:?}: exit {:?}\n{}{}",
        o.status.code(),
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

fn json(text: &str, what: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: bad JSON ({e}): {text}"))
}

/// The packaged `slurmwatch ARGS` here, on the login host: must exit 0 and print JSON.
fn sw_json(args: &[&str]) -> Value {
    let o = Command::new(SW)
        .args(args)
        .output()
        .expect("run slurmwatch");
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    json(&stdout(&o), &format!("{args:?}"))
}

/// `scripts/site.sh service HOST start|stop` (the compute host's node service).
fn service(host: &str, action: &str) {
    let o = Command::new(SITE_SH)
        .args(["service", host, action])
        .output()
        .expect("run site.sh service");
    assert!(
        o.status.success(),
        "service {host} {action}: {}",
        stderr(&o)
    );
}

/// The recording of `job` on `node`, read there: the report of its file alone, as root on
/// the compute host asks for it.
fn recording(node: &str, job: u32) -> Value {
    let file = format!("{SPOOL_BASE}/{node}/{job}.sqlite");
    let text = on_ok(
        node,
        &[
            SW,
            "report",
            &job.to_string(),
            "--file",
            &file,
            "--json",
            "--no-log",
            "--no-sacct",
        ],
    );
    let r = json(&text, &file);
    assert_eq!(r["nodes"][0]["node"], node, "{file}: {:#}", r["nodes"]);
    r
}

fn peak(r: &Value) -> u64 {
    r["memory"]["peak_working_set_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no peak: {:#}", r["memory"]))
}

/// A two-node job of `USER1` ([`two_node_script`] for `seconds`), running and holding its
/// memory on c1 and c2; cancelled when the guard drops.
fn holding_two_node_job(name: &str, seconds: u32) -> (Job, CancelOnDrop) {
    let job = Submit::new(name, &two_node_script(seconds))
        .user(USER1)
        .submit();
    let cancel = CancelOnDrop(job.id);
    job.wait_running(WAIT);
    let end = Instant::now() + WAIT;
    while !(job.dir.join("holding-c1").exists() && job.dir.join("holding-c2").exists()) {
        assert!(Instant::now() < end, "job {} never held its memory", job.id);
        std::thread::sleep(Duration::from_millis(200));
    }
    (job, cancel)
}

/// The job's node list as sacct has it (one node: its name).
pub(crate) fn node_list(job: &Job) -> String {
    crate::slurmdbd::sacct_job_field(job, "NodeList")
}

/// ctl's EpilogSlurmctld log.
fn ctld_log() -> String {
    String::from_utf8_lossy(&on("ctl", &["cat", CTLD_LOG]).stdout).into_owned()
}

/// `slurmwatch ctld-backfill` on ctl for `job` alone, over the window `since`..`until`.
fn backfill(job: &Job, since: &str, until: &str) -> Output {
    let id = job.id.to_string();
    on(
        "ctl",
        &[
            SW,
            "ctld-backfill",
            "--since",
            since,
            "--until",
            until,
            "--jobs",
            &id,
        ],
    )
}

/// [`backfill`], which must exit 0 having stored the summary of all `nodes` of `job`.
fn backfill_stores(job: &Job, since: &str, until: &str, nodes: usize) {
    let o = backfill(job, since, until);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    let want = format!(
        "job {}: summary of {nodes} of {nodes} node(s) stored in AdminComment",
        job.id
    );
    assert!(out.contains(&want), "{out}");
}

/// ctl's EpilogSlurmctld log lines about `job` past byte `from`, once there are some (90 s
/// at most).
fn ctld_log_lines(job: &Job, from: usize) -> Vec<String> {
    let t = Instant::now();
    loop {
        let log = ctld_log();
        let lines: Vec<String> = log
            .get(from..)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&format!("job {}:", job.id)))
            .map(String::from)
            .collect();
        if !lines.is_empty() || t.elapsed() > Duration::from_secs(90) {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The job's AdminComment once ctl's EpilogSlurmctld has stored it: ours (`JS1:`).
fn admin_comment(job: &Job) -> String {
    let t = Instant::now();
    loop {
        let c = crate::slurmdbd::admin_comment_now(job);
        if !c.is_empty() {
            assert!(
                c.starts_with("JS1:") && slurmwatch_core::analysis::admin_comment::is_ours(&c),
                "job {}: {c}",
                job.id
            );
            return c;
        }
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "job {}: no AdminComment after 90 s; ctl's ctld-epilog log:\n{}",
            job.id,
            ctld_log()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The job's archive copies moved aside on the shared directory (put back on drop), so that
/// a report on login has nothing but slurmdbd's summary.
struct ArchiveAway {
    moved: Vec<(PathBuf, PathBuf)>,
}

impl ArchiveAway {
    fn new(job: u32) -> ArchiveAway {
        let away = PathBuf::from(format!("/shared/.away-{}-{job}", std::process::id()));
        std::fs::create_dir_all(&away).unwrap();
        let mut moved = Vec::new();
        for user in std::fs::read_dir(ARCHIVE_BASE).unwrap().flatten() {
            for f in std::fs::read_dir(user.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if f.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{job}."))
                {
                    let to = away.join(f.file_name());
                    std::fs::rename(f.path(), &to).unwrap();
                    moved.push((f.path(), to));
                }
            }
        }
        ArchiveAway { moved }
    }
}

impl Drop for ArchiveAway {
    fn drop(&mut self) {
        for (from, to) in &self.moved {
            let _ = std::fs::rename(to, from);
        }
    }
}

/// `job`'s archive copy from `node` on the shared directory, once it holds the epilog's
/// summary (the epilog refreshes the copy after writing it).
fn wait_archived(job: u32, node: &str) {
    let copy = PathBuf::from(format!("{ARCHIVE_BASE}/{USER1}/{job}.{node}.sqlite"));
    let t = Instant::now();
    // Immutable: nothing written beside the user's file (no -shm, no lock).
    let summarised = || {
        rusqlite::Connection::open_with_flags(
            format!("file:{}?immutable=1", copy.display()),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        )
        .and_then(|c| c.query_row("SELECT count(*) FROM summary", [], |r| r.get::<_, i64>(0)))
        .is_ok_and(|n| n > 0)
    };
    while !summarised() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{}: no archive copy with the epilog's summary",
            copy.display()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `slurmwatch report JOB --json` on login.
fn report(job: u32) -> Value {
    sw_json(&["report", &job.to_string(), "--json", "--no-log"])
}

/// A node's figure in a report, by name.
fn node_peak(r: &Value, node: &str) -> u64 {
    r["nodes"]
        .as_array()
        .and_then(|a| a.iter().find(|n| n["node"] == node))
        .and_then(|n| n["peak_working_set_bytes"].as_u64())
        .unwrap_or_else(|| panic!("no {node} in {:#}", r["nodes"]))
}

/// Each task writes `node-<node>` (its node and the MiB it holds) and holds that much for
/// `secs` seconds: 150 MiB on the batch node, 400 MiB on the other.
fn two_node_script(secs: u32) -> String {
    format!(
        r#"#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --mem=700M
#SBATCH --slurmwatch=1
srun bash -c 'if [ "$SLURM_NODEID" = 1 ]; then mb=400; else mb=150; fi
echo "$mb" > "node-$SLURMD_NODENAME"
python3 -c "
import time
a = bytearray($mb * 1024 * 1024)
for i in range(0, len(a), 4096): a[i] = 1
open(\"holding-$SLURMD_NODENAME\", \"w\").close()
time.sleep({secs})
"'"#
    )
}

/// What the job's task on `node` held (MiB), as it wrote it.
fn held_mib(job: &Job, node: &str) -> f64 {
    std::fs::read_to_string(job.dir.join(format!("node-{node}")))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("job {}: no task ran on {node}: {}", job.id, job.output()))
}

/// (a) A recorded two-node job: `report --json` on login, which has no spool, gives both
/// nodes' working-set peaks equal to the recordings' on c1 and c2 — from the archive on the
/// shared directory, and with that moved away from the AdminComment summary alone.
#[cluster_test(Phase::Site)]
fn site_two_node_job_report_on_login_equals_each_hosts_recording() {
    on_login();
    let _p = shared_plugstack();
    let job = Submit::new("site-2n", &two_node_script(5))
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    assert_eq!(node_list(&job), "c[1-2]");
    admin_comment(&job);
    let mut recorded = Vec::new();
    for node in ["c1", "c2"] {
        let r = recording(node, job.id);
        let p = peak(&r);
        let mib = p as f64 / MIB;
        let held = held_mib(&job, node);
        // Ground truth: the task's allocation (plus bash and python themselves, < 50 MiB).
        assert!(
            (held..held + 50.0).contains(&mib),
            "{node}: recorded peak {mib:.1} MiB, the task held {held} MiB"
        );
        // Not in the package's default spool: the site's `%n` spool only.
        assert!(
            !on(
                node,
                &[
                    "test",
                    "-e",
                    &format!("/var/spool/slurmwatch/{}.sqlite", job.id)
                ]
            )
            .status
            .success(),
            "{node}: a file in the default spool"
        );
        recorded.push((node, p));
    }
    wait_archived(job.id, "c1");
    wait_archived(job.id, "c2");
    let from_archive = report(job.id);
    assert_eq!(
        from_archive["source"], "recorded_file",
        "{:#}",
        from_archive["notes"]
    );
    for (node, p) in &recorded {
        assert_eq!(
            node_peak(&from_archive, node),
            *p,
            "{node}, from the archive"
        );
    }
    let _away = ArchiveAway::new(job.id);
    assert_eq!(_away.moved.len(), 2, "archive copies: {:?}", _away.moved);
    let r = report(job.id);
    assert_eq!(r["source"], "slurmdbd_summary", "{:#}", r["notes"]);
    for (node, p) in &recorded {
        assert_eq!(node_peak(&r, node), *p, "{node}, from the summary");
    }
    let (heavy, max) = recorded.iter().max_by_key(|(_, p)| *p).copied().unwrap();
    assert_eq!(
        held_mib(&job, heavy),
        400.0,
        "the 400 MiB task's node has the larger peak"
    );
    assert_eq!(r["memory"]["peak_working_set_bytes"], max);
    assert_eq!(r["memory"]["peak_working_set_node"], heavy);
}

/// (b) c2's endpoint is stopped while a job on c2 ends: ctl's EpilogSlurmctld log names the
/// job and c2 and nothing is stored; once the endpoint is back, `ctld-backfill` on ctl stores
/// the summary, and `report` on login (archive moved away) uses it.
#[cluster_test(Phase::Site)]
fn site_endpoint_down_at_the_end_is_logged_on_ctl_and_backfilled() {
    on_login();
    // No other test's job ends on c2 while its endpoint is down.
    let _x = exclusive_cluster();
    let log_before = ctld_log().len();
    let since = format!("@{}", now() - 5);
    let mut down = EndpointDown::new("c2");
    let script = "python3 -c \"import time; a = bytearray(160 << 20)\nfor i in range(0, len(a), 4096): a[i] = 1\ntime.sleep(3)\"";
    let job = Submit::new("site-down", script)
        .arg("--slurmwatch=1")
        .arg("--nodelist=c2")
        .arg("--mem=400M")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    assert_eq!(node_list(&job), "c2");
    let lines = ctld_log_lines(&job, log_before);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("node c2: no summary: ") && l.contains("refused")),
        "ctl's log: {lines:#?}"
    );
    assert_eq!(
        crate::slurmdbd::admin_comment_now(&job),
        "",
        "stored while c2 was down"
    );

    down.back_up();
    let until = format!("@{}", now() + 5);
    backfill_stores(&job, &since, &until, 1);
    admin_comment(&job);
    let p = peak(&recording("c2", job.id));
    assert!(
        (160.0..210.0).contains(&(p as f64 / MIB)),
        "c2's recorded peak {} MiB, 160 MiB held",
        p as f64 / MIB
    );
    let _away = ArchiveAway::new(job.id);
    assert_eq!(_away.moved.len(), 1, "{:?}", _away.moved);
    let r = report(job.id);
    assert_eq!(r["source"], "slurmdbd_summary", "{:#}", r["notes"]);
    assert_eq!(node_peak(&r, "c2"), p);
    assert_eq!(r["memory"]["peak_working_set_bytes"], p);
}

/// 96 MiB + 16 MiB × i held for 3 s with a core busy.
fn work(i: usize) -> String {
    format!(
        "python3 -c \"import time; a = bytearray({} << 20)\nfor j in range(0, len(a), 4096): a[j] = 1\nt = time.time()\nwhile time.time() - t < 3: pass\"",
        96 + 16 * i
    )
}

/// (c) `sizing` on login over five runs of one workload sizes `--mem` from the peaks recorded
/// on c1 and c2 (in the site's `%n` spool), through their summaries in slurmdbd.
#[cluster_test(Phase::Site)]
fn site_sizing_on_login_sizes_mem_from_the_recorded_peaks() {
    on_login();
    let _p = shared_plugstack();
    let since = format!("@{}", now() - 5);
    let tag = tag();
    let jobs: Vec<Job> = (0..5)
        .map(|i| {
            Submit::new(&format!("site{tag}-run-{}", i + 1), &work(i))
                .arg("--slurmwatch=1")
                // Below the largest peak plus the headroom (166 MiB + 20 %): sizing raises it.
                .arg("--mem=184M")
                .arg("-t")
                .arg("5")
                .user(USER1)
                .submit()
        })
        .collect();
    let (mut peaks, mut nodes) = (Vec::new(), Vec::new());
    for j in &jobs {
        assert_eq!(j.wait(WAIT).state, "COMPLETED", "{}", j.output());
        admin_comment(j);
        let node = node_list(j);
        assert!(node == "c1" || node == "c2", "job {} ran on {node}", j.id);
        peaks.push(peak(&recording(&node, j.id)));
        nodes.push(node);
    }
    let until = format!("@{}", now() + 5);
    let s = sw_json(&[
        "sizing",
        "-S",
        &since,
        "-E",
        &until,
        "-u",
        USER1,
        "--workload",
        &format!("site{tag}-run-#"),
        "--json",
    ]);
    let w = &s["workloads"][0];
    assert_eq!(w["runs"], 5, "{s:#}");
    assert_eq!(w["recorded_runs"], 5, "{s:#}");
    assert!(
        s["window"]["slurmdbd_summaries"].as_u64().unwrap_or(0) >= 5,
        "{:#}",
        s["window"]
    );
    let mem = w["advice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["flag"] == "--mem")
        .unwrap_or_else(|| panic!("no --mem advice: {w:#}"));
    eprintln!("sizing --mem: {mem:#}; recorded peaks {peaks:?}");
    assert_eq!(mem["basis"], "recorded working-set peak (5 recorded runs)");
    let max = *peaks.iter().max().unwrap();
    assert_eq!(
        mem["evidence"],
        format!(
            "largest peak {} over 5 runs",
            slurmwatch_core::units::bytes(max)
        )
    );
    // The largest peak plus the headroom, as a flag: above the request, raised to it.
    assert_eq!(mem["verdict"], "raise", "{mem:#}");
    let need =
        (max as f64 * (1.0 + slurmwatch_core::analysis::MEM_HEADROOM_PERCENT / 100.0)) as u64;
    assert_eq!(
        mem["suggestion"],
        slurmwatch_core::units::mem_flag(need),
        "{mem:#}"
    );
    assert!(
        (96.0 + 64.0..96.0 + 64.0 + 50.0).contains(&(max as f64 / MIB)),
        "largest recorded peak {} MiB, 160 MiB held",
        max as f64 / MIB
    );

    // `history` on login: the same five runs, each recorded, through their summaries.
    let h = sw_json(&["history", "-S", &since, "-E", &until, "-u", USER1, "--json"]);
    let hw = h["workloads"]
        .as_array()
        .and_then(|a| a.iter().find(|w| w["name"] == format!("site{tag}-run-#")))
        .unwrap_or_else(|| panic!("no workload site{tag}-run-#: {h:#}"));
    assert_eq!(hw["runs"], 5, "{hw:#}");
    assert_eq!(hw["recorded_runs"], 5, "{hw:#}");
    assert_eq!(hw["completed"], 5, "{hw:#}");
    // `jobs` on login: one row per job, its memory efficiency the recorded peak over the
    // 184 MiB limit: from the archive copies on the shared directory, and with those moved
    // away, from the summaries alone.
    let ids: Vec<String> = jobs.iter().map(|j| j.id.to_string()).collect();
    let mut args = vec!["jobs", "--json"];
    args.extend(ids.iter().map(String::as_str));
    for (j, node) in jobs.iter().zip(&nodes) {
        wait_archived(j.id, node);
    }
    let from_archive = sw_json(&args);
    let away: Vec<ArchiveAway> = jobs.iter().map(|j| ArchiveAway::new(j.id)).collect();
    let from_summaries = sw_json(&args);
    drop(away);
    for (rows, basis) in [(&from_archive, "recorded"), (&from_summaries, "summary")] {
        for ((j, id), p) in jobs.iter().zip(&ids).zip(&peaks) {
            let row = rows["jobs"]
                .as_array()
                .and_then(|a| a.iter().find(|r| r["job_id"].as_str() == Some(id)))
                .unwrap_or_else(|| panic!("no row for job {id}: {rows:#}"));
            assert_eq!(row["basis"], basis, "{row:#}");
            let got = row["efficiency"]["memory_efficiency_percent"]
                .as_f64()
                .unwrap_or_else(|| panic!("{row:#}"));
            let want = *p as f64 * 100.0 / (184.0 * MIB);
            assert!(
                (got - want).abs() < 1e-3,
                "job {} ({basis}): memory efficiency {got} %, recorded peak ÷ 184 MiB = {want} %",
                j.id
            );
        }
    }
}

/// A Prometheus API query on ctl: the result array.
fn prom_query(query: &str, at: f64) -> Vec<Value> {
    let text = on_ok(
        "ctl",
        &[
            "curl",
            "-sfG",
            "--data-urlencode",
            &format!("query={query}"),
            "--data-urlencode",
            &format!("time={at:.3}"),
            &format!("{PROM}/api/v1/query"),
        ],
    );
    let v = json(&text, query);
    assert_eq!(v["status"], "success", "{v:#}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// (d) Prometheus on ctl scrapes both compute hosts' endpoints: both targets up, a running
/// two-node job's working set on each node is the row of that node's file at the reading's
/// time, `promtool check metrics` is clean on each host's scrape, and login (not in
/// `--metrics-allow`) is refused.
#[cluster_test(Phase::Site)]
fn site_prometheus_on_ctl_scrapes_both_compute_hosts() {
    on_login();
    let _p = shared_plugstack();
    let (job, _cancel) = holding_two_node_job("site-prom", 25);
    // A few scrapes (every 2 s) of the held memory.
    std::thread::sleep(Duration::from_secs(8));
    let targets = json(
        &on_ok("ctl", &["curl", "-sf", &format!("{PROM}/api/v1/targets")]),
        "targets",
    );
    let mut up: Vec<String> = targets["data"]["activeTargets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["health"] == "up")
        .map(|t| t["labels"]["instance"].as_str().unwrap_or("").to_string())
        .collect();
    up.sort();
    assert_eq!(up, ["c1:9944", "c2:9944"], "{targets:#}");

    let t = now_s() - 1.0;
    let sel = format!("jobid=\"{}\",step=\"\"", job.id);
    let ws = prom_query(&format!("slurmwatch_memory_working_set_bytes{{{sel}}}"), t);
    assert_eq!(ws.len(), 2, "{ws:#?}");
    for series in &ws {
        let node = series["metric"]["node"].as_str().unwrap().to_string();
        assert_eq!(series["metric"]["instance"], format!("{node}:9944"));
        assert_eq!(series["metric"]["user"], USER1);
        let value: f64 = series["value"][1].as_str().unwrap().parse().unwrap();
        let ts = prom_query(
            &format!("slurmwatch_sample_timestamp_seconds{{{sel},node=\"{node}\"}}"),
            t,
        );
        assert_eq!(ts.len(), 1, "{ts:#?}");
        let t_ms =
            (ts[0]["value"][1].as_str().unwrap().parse::<f64>().unwrap() * 1000.0).round() as i64;
        // The file on that host's disk (the test bed's view of it), at the reading's time.
        let file = format!(
            "/var/lib/slurmwatch-site/hosts/{node}/lib-slurmwatch/spool/{node}/{}.sqlite",
            job.id
        );
        let rows = slurmwatch_core::store::Reader::open(Path::new(&file))
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .samples(&slurmwatch_core::model::Series::Job)
            .unwrap();
        let row = rows
            .iter()
            .find(|r| r.t_unix_ms == t_ms)
            .unwrap_or_else(|| panic!("{node}: no row at {t_ms} in {file}"));
        let file_ws = row.usage.memory_working_set_bytes.unwrap() as f64;
        assert_eq!(value, file_ws, "{node}: Prometheus vs the file at {t_ms}");
        let held = held_mib(&job, &node);
        assert!(
            (held..held + 50.0).contains(&(value / MIB)),
            "{node}: {} MiB in Prometheus, {held} MiB held",
            value / MIB
        );
    }

    for node in ["c1", "c2"] {
        let url = format!("http://{node}:9944/metrics");
        let text = on_ok("ctl", &["curl", "-sf", &url]);
        assert!(
            text.contains(&format!("jobid=\"{}\"", job.id)),
            "{node}'s scrape lacks the job"
        );
        let mut c = Command::new(SITE_SH)
            .args(["on", "ctl", "promtool", "check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let o = c.wait_with_output().unwrap();
        assert!(
            o.status.success() && stdout(&o).trim().is_empty() && stderr(&o).trim().is_empty(),
            "promtool on {node}'s scrape: {}{}",
            stdout(&o),
            stderr(&o)
        );
        // login is not Prometheus: refused.
        let o = on(
            "login",
            &["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", &url],
        );
        assert_eq!(stdout(&o), "403", "{node}'s /metrics from login");
    }
}

/// (e) `doctor --endpoints` on ctl: every node answers the controller; and `doctor` on each
/// compute host finds it ready as docs/admin.md set it up.
#[cluster_test(Phase::Site)]
fn site_doctor_on_ctl_says_every_node_answers() {
    on_login();
    let _p = shared_plugstack();
    let o = on("ctl", &[SW, "doctor", "--endpoints"]);
    let text = stdout(&o) + &stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    for n in ["c1", "c2"] {
        assert!(
            text.lines().any(|l| l.starts_with("ok    endpoint")
                && l.contains(&format!("{n} answers the controller"))),
            "{n}: {text}"
        );
    }
    assert!(
        text.contains("every node's endpoint answers the controller"),
        "{text}"
    );
    for n in ["c1", "c2"] {
        let o = on(n, &[SW, "doctor"]);
        let text = stdout(&o) + &stderr(&o);
        assert_eq!(o.status.code(), Some(0), "doctor on {n}:\n{text}");
    }
}

/// The live view of a running two-node job, as its user asks for it: on c1 (its own node's
/// file in the spool there) and on login (no spool: each node's figures reached from there),
/// every node reporting the memory its task holds.
#[cluster_test(Phase::Site)]
fn site_live_view_on_a_compute_host_and_from_login() {
    on_login();
    let _p = shared_plugstack();
    let (job, _cancel) = holding_two_node_job("site-live", 30);
    // The file's 1-s rows catch up with the held memory.
    std::thread::sleep(Duration::from_secs(3));
    let id = job.id.to_string();
    let live = |host: &str| -> Value {
        let text = on_ok(
            host,
            &["runuser", "-u", USER1, "--", SW, &id, "--once", "--json"],
        );
        json(&text, &format!("the live view on {host}"))
    };
    let on_c1 = live("c1");
    let from_login = live("login");
    for (host, v) in [("c1", &on_c1), ("login", &from_login)] {
        let nodes = v["nodes"]
            .as_array()
            .unwrap_or_else(|| panic!("{host}: {v:#}"));
        let mut names: Vec<&str> = nodes.iter().filter_map(|n| n["node"].as_str()).collect();
        names.sort();
        assert_eq!(names, ["c1", "c2"], "{host}: {v:#}");
        for n in nodes {
            let node = n["node"].as_str().unwrap();
            assert_eq!(n["reporting"], true, "{host}, {node}: {n:#}");
            let ws = n["memory"]["working_set_bytes"].as_f64().unwrap_or(0.0) / MIB;
            let held = held_mib(&job, node);
            assert!(
                (held..held + 50.0).contains(&ws),
                "{host}, {node}: working set {ws:.1} MiB, {held} MiB held ({})",
                n["source"]
            );
            eprintln!(
                "live view on {host}: {node} {ws:.1} MiB via {}",
                n["source"]
            );
        }
    }
    // On c1 its own node is read from the spool there.
    let c1 = on_c1["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "c1")
        .unwrap();
    assert_eq!(c1["source"], "plugin_file", "{c1:#}");
}

/// The Ended mail of `job` that ctl's mailer kept (`/var/log/slurm/mail`, one file per mail,
/// read there), waited for.
fn ctl_end_mail(job: u32, timeout: Duration) -> crate::mail::Mail {
    let want = format!("Slurm Job_id={job} ");
    let t = Instant::now();
    loop {
        let list = on_ok("ctl", &["ls", "/var/log/slurm/mail"]);
        let mut names: Vec<&str> = list.lines().filter(|n| n.ends_with(".mail")).collect();
        names.sort();
        for n in names {
            let text = on_ok("ctl", &["cat", &format!("/var/log/slurm/mail/{n}")]);
            let m = crate::mail::parse_mail(n, &text);
            if m.args.len() == 3
                && m.args[0] == "-s"
                && m.args[1].starts_with(&want)
                && m.args[1].contains(" Ended, ")
            {
                return m;
            }
        }
        assert!(
            t.elapsed() < timeout,
            "no Ended mail for job {job} on ctl within {timeout:?}; ctl's ctld-epilog log:\n{}",
            ctld_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// (f) The END mail is composed on ctl, which has no spool, and Slurm hands it over as the job
/// ends, before the EpilogSlurmctld has stored the summary: the packaged MailProg wrapper
/// holds it until the summary is in slurmdbd, so it carries the working-set peak recorded on
/// c1 and the `#SBATCH` lines, and it arrives within the stated bound
/// (SLURMWATCH_MAIL_HOLD, 90 s, and the report's own 30 s).
#[cluster_test(Phase::Site)]
fn site_end_mail_on_ctl_carries_the_recorded_peak_and_sbatch_lines() {
    on_login();
    let _p = shared_plugstack();
    let script = "python3 -c \"import time; a = bytearray(200 << 20)\nfor i in range(0, len(a), 4096): a[i] = 1\ntime.sleep(3)\"";
    let job = Submit::new("site-mail", script)
        .arg("--slurmwatch=1")
        .arg("--nodelist=c1")
        .arg("--mem=512M")
        .arg("--mail-type=END")
        .arg("-t")
        .arg("5")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    let ended_ms = crate::mail::now_ms();
    let crate::mail::Mail {
        args,
        body,
        sent_unix_ms,
    } = ctl_end_mail(job.id, Duration::from_secs(150));
    let late_ms = sent_unix_ms - ended_ms;
    eprintln!(
        "job {}: mail on ctl {late_ms} ms after sacct showed its end",
        job.id
    );
    assert!(late_ms < 120_000, "mail {late_ms} ms after the end");
    assert!(
        args[1].ends_with(", COMPLETED, ExitCode 0") && args[2].starts_with(USER1),
        "{args:?}"
    );
    assert!(
        body.contains("Source: the job's summary in slurmdbd (AdminComment"),
        "{body}"
    );
    // Ground truth: the recording on c1, read there.
    let p = peak(&recording("c1", job.id));
    assert!(
        (200.0..250.0).contains(&(p as f64 / MIB)),
        "c1's recorded peak {} MiB, 200 MiB held",
        p as f64 / MIB
    );
    let line = format!("working set peak {}", slurmwatch_core::units::bytes(p));
    assert!(body.contains(&line), "no {line:?} in the mail:\n{body}");
    assert!(
        body.lines()
            .any(|l| l.trim_start().starts_with("#SBATCH --mem=")),
        "{body}"
    );
}

/// (g) c2's endpoint is down while a two-node job ends: ctl stores c1's figures as a partial
/// summary naming c2 and logs c2; `report` on login (no spool, the archive moved away) says
/// the summary lacks c2 and shows c1 alone. Once c2's endpoint is back, `ctld-backfill`
/// replaces it with both nodes', the report on login has each node's recorded peak, and a
/// second backfill finds nothing to do.
#[cluster_test(Phase::Site)]
fn site_partial_summary_is_said_on_login_and_completed_by_the_backfill() {
    on_login();
    // No other test's job ends on c2 while its endpoint is down.
    let _x = exclusive_cluster();
    let log_before = ctld_log().len();
    let since = format!("@{}", now() - 5);
    let mut down = EndpointDown::new("c2");
    let job = Submit::new("site-partial", &two_node_script(3))
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    assert_eq!(node_list(&job), "c[1-2]");
    let partial = slurmwatch_core::analysis::admin_comment::decode(&admin_comment(&job)).unwrap();
    let stored: Vec<&str> = partial.nodes.iter().map(|n| n.meta.node.as_str()).collect();
    assert_eq!(stored, ["c1"], "{partial:#?}");
    assert_eq!(partial.unanswered_nodes, ["c2"]);
    let lines = ctld_log_lines(&job, log_before);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("node c2: no summary: ") && l.contains("refused")),
        "ctl's log: {lines:#?}"
    );
    let peaks: Vec<u64> = ["c1", "c2"]
        .iter()
        .map(|n| peak(&recording(n, job.id)))
        .collect();
    for node in ["c1", "c2"] {
        wait_archived(job.id, node);
    }
    {
        let _away = ArchiveAway::new(job.id);
        assert_eq!(_away.moved.len(), 2, "{:?}", _away.moved);
        let r = report(job.id);
        assert_eq!(r["source"], "slurmdbd_summary", "{:#}", r["notes"]);
        assert_eq!(node_peak(&r, "c1"), peaks[0]);
        // c2 is listed from sacct's node list, with nothing for a figure (never a 0).
        let c2 = r["nodes"]
            .as_array()
            .and_then(|a| a.iter().find(|n| n["node"] == "c2"))
            .unwrap_or_else(|| panic!("no c2 in {:#}", r["nodes"]));
        assert_eq!(c2["recorded"], false, "{c2:#}");
        assert!(c2["peak_working_set_bytes"].is_null(), "{c2:#}");
        assert_eq!(r["memory"]["peak_working_set_bytes"], peaks[0]);
        let notes = r["notes"].to_string();
        assert!(
            notes.contains("has no figures from c2") && notes.contains("ctld-backfill"),
            "{notes}"
        );
    }

    down.back_up();
    let until = format!("@{}", now() + 5);
    backfill_stores(&job, &since, &until, 2);
    let whole = slurmwatch_core::analysis::admin_comment::decode(&admin_comment(&job)).unwrap();
    assert!(whole.unanswered_nodes.is_empty(), "{whole:#?}");
    let _away = ArchiveAway::new(job.id);
    let r = report(job.id);
    assert_eq!(r["source"], "slurmdbd_summary", "{:#}", r["notes"]);
    assert_eq!(node_peak(&r, "c1"), peaks[0]);
    assert_eq!(node_peak(&r, "c2"), peaks[1]);
    assert!(
        !r["notes"].to_string().contains("has no figures from"),
        "{:#}",
        r["notes"]
    );
    // Whole now: not asked again.
    let again = stdout(&backfill(&job, &since, &until));
    assert!(
        again.contains("0 finished job(s) without a whole summary"),
        "{again}"
    );
}

/// A compute host's fake cards (its own state file, bind-mounted there by scripts/site.sh as
/// the fake NVML's default path), written from login through the site's directory.
fn set_cards(host: &str, devices: &[Value]) {
    let dir = PathBuf::from(format!("/var/lib/slurmwatch-site/hosts/{host}/fake-nvml"));
    let tmp = dir.join("state.json.tmp");
    std::fs::write(&tmp, serde_json::json!({ "devices": devices }).to_string()).unwrap();
    std::fs::rename(&tmp, dir.join("state.json")).unwrap();
}

/// A healthy card (not at its power limit, nothing holding its clocks), or one held back by
/// a hardware slowdown (SM 385 of 1785 MHz, 163 of 400 W); its UUID names `host`.
fn site_card(host: &str, i: u32, held_back: bool) -> Value {
    let mut c = fake_a100(i);
    let n: u32 = host.trim_start_matches('c').parse().unwrap();
    c["uuid"] = Value::from(format!("GPU-{n:04x}{i:04x}-5f1c-2a3b-4c5d-0123456789ab"));
    c["power_usage_mw"] = Value::from(250_000);
    c["throttle_reasons"] = Value::from(0);
    if held_back {
        c["sm_clock"] = Value::from(385);
        c["power_usage_mw"] = Value::from(163_000);
        c["throttle_reasons"] = Value::from(8); // nvmlClocksThrottleReasonHwSlowdown
    }
    c
}

/// (h) `cards` on login, which has no spool: two recorded GPU jobs on c1, whose card 1 a
/// hardware slowdown holds back, and one on c2, healthy. Each card is listed under its own
/// node with its jobs and the held-back ones counted, from the archive copies and again from
/// the summaries in slurmdbd alone (too few jobs for any card to be named).
#[cluster_test(Phase::Site)]
fn site_cards_on_login_count_each_hosts_cards() {
    on_login();
    let _p = shared_plugstack();
    install_fake_nvml();
    let c1: Vec<Value> = (0..2).map(|i| site_card("c1", i, i == 1)).collect();
    let c2: Vec<Value> = (0..2).map(|i| site_card("c2", i, false)).collect();
    set_cards("c1", &c1);
    set_cards("c2", &c2);
    let since = format!("@{}", now() - 2);
    let jobs: Vec<(Job, &str)> = ["c1", "c1", "c2"]
        .into_iter()
        .map(|node| {
            let j = Submit::new("site-cards", "sleep 6")
                .arg("--slurmwatch=1")
                .arg(&format!("--nodelist={node}"))
                .arg("--gres=gpu:2")
                .arg("-t")
                .arg("5")
                .user(USER1)
                .submit();
            (j, node)
        })
        .collect();
    for (j, node) in &jobs {
        assert_eq!(j.wait(WAIT).state, "COMPLETED", "{}", j.output());
        admin_comment(j);
        wait_archived(j.id, node);
    }
    let until = format!("@{}", now() + 2);
    let check = |v: &Value, from: &str| {
        assert_eq!(v["window"]["gpu_jobs"], 3, "{from}: {v:#}");
        assert_eq!(v["named_cards"], serde_json::json!([]), "{from}: {v:#}");
        for (host, cards, jobs_on) in [("c1", &c1, 2), ("c2", &c2, 1)] {
            for (i, card) in cards.iter().enumerate() {
                let uuid = card["uuid"].as_str().unwrap();
                let c = v["cards"]
                    .as_array()
                    .and_then(|a| a.iter().find(|c| c["uuid"] == uuid))
                    .unwrap_or_else(|| panic!("{from}: no card {uuid}: {v:#}"));
                assert_eq!(c["node"], host, "{from}: {c:#}");
                assert_eq!(c["jobs"], jobs_on, "{from}: {c:#}");
                let held = if host == "c1" && i == 1 { jobs_on } else { 0 };
                assert_eq!(c["held_back_jobs"], held, "{from}: {c:#}");
                if held > 0 {
                    assert_eq!(c["held_back_sm_clock_mhz"], 385.0, "{from}: {c:#}");
                    assert_eq!(c["held_back_power_watts"], 163.0, "{from}: {c:#}");
                }
            }
        }
    };
    let args = ["cards", "-S", &since, "-E", &until, "--json"];
    check(&sw_json(&args), "the archive");
    let _away: Vec<ArchiveAway> = jobs.iter().map(|(j, _)| ArchiveAway::new(j.id)).collect();
    check(&sw_json(&args), "the summaries");
}
