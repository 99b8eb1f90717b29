//! Every job's summary in slurmdbd (issue 16): the node serves a finished job's summary on
//! `slurmwatch metrics --listen` (`GET /jobs/<id>/summary`), the cluster's EpilogSlurmctld
//! (the shipped contrib/slurmctld-epilog.sh, configured by scripts/cluster.sh to ask
//! 127.0.0.1:9944) stores it as the job's AdminComment with sacctmgr, and `report`, `history`
//! and `sizing` read it from sacct with every file moved away. Also: another tool's
//! AdminComment is left as it was.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::Value;
use slurmwatch_tests::*;

const WAIT: Duration = Duration::from_secs(600);
/// scripts/cluster.sh's CTLD_SUMMARY_PORT.
const SUMMARY_PORT: u16 = 9944;
const MIB: f64 = 1024.0 * 1024.0;

/// The node's summary server, as a site runs it (root, the node's spool); stopped on drop.
/// One at a time (it has the port the cluster's EpilogSlurmctld asks).
pub struct Server(
    Child,
    #[allow(dead_code)] std::sync::MutexGuard<'static, ()>,
);

static PORT_HELD: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Server {
    pub fn start() -> Server {
        let held = PORT_HELD.lock().unwrap_or_else(|e| e.into_inner());
        let child = Command::new(slurmwatch_bin())
            .args(["metrics", "--spool", SPOOL, "--listen"])
            .arg(format!("127.0.0.1:{SUMMARY_PORT}"))
            .spawn()
            .expect("start slurmwatch metrics");
        let s = Server(child, held);
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", SUMMARY_PORT)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the server did not listen"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The jobs' files moved out of the spool for the life of the guard, then put back.
pub struct FilesAway {
    moved: Vec<(PathBuf, PathBuf)>,
}

impl FilesAway {
    pub fn new(jobs: &[u32], to: &Path) -> FilesAway {
        std::fs::create_dir_all(to).unwrap();
        let mut moved = Vec::new();
        for j in jobs {
            for entry in std::fs::read_dir(SPOOL).unwrap().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(&format!("{j}.")) {
                    let dst = to.join(&name);
                    std::fs::rename(entry.path(), &dst).unwrap();
                    moved.push((entry.path(), dst));
                }
            }
            assert!(!exists(&spool_file(*j)), "job {j}'s file is still there");
        }
        FilesAway { moved }
    }
}

impl Drop for FilesAway {
    fn drop(&mut self) {
        for (home, away) in &self.moved {
            let _ = std::fs::rename(away, home);
        }
    }
}

/// `sacct -o AdminComment` for the job, once the EpilogSlurmctld has stored it.
pub fn admin_comment(job: &Job) -> String {
    let t = Instant::now();
    loop {
        let o = run(
            "sacct",
            &[
                "-j",
                &job.id.to_string(),
                "-X",
                "-n",
                "-P",
                "-o",
                "AdminComment",
            ],
        );
        let c = stdout(&o).trim().to_string();
        if !c.is_empty() {
            return c;
        }
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "job {}: no AdminComment after 90 s; ctld-epilog log:\n{}",
            job.id,
            std::fs::read_to_string("/var/log/slurm/ctld-epilog.log").unwrap_or_default()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(slurmwatch_bin())
        .args(args)
        .output()
        .expect("run slurmwatch");
    (o.status.code().unwrap_or(-1), stdout(&o), stderr(&o))
}

/// 96 MiB + 16 MiB × i held for 3 s with a core busy.
fn work(i: usize) -> String {
    format!(
        "python3 -c \"import time; a = bytearray({} << 20); t = time.time()\nwhile time.time() - t < 3: pass\"",
        96 + 16 * i
    )
}

#[test]
#[ignore]
fn slurmdbd_summary_reaches_sacct_and_serves_report_and_sizing_without_files() {
    if !runs_in(
        "slurmdbd_summary_reaches_sacct_and_serves_report_and_sizing_without_files",
        Phase::Cgroup,
    ) {
        return;
    }
    let _p = shared_plugstack();
    let _server = Server::start();
    let since = format!("@{}", now() - 5);
    let tag = tag();
    let names: Vec<String> = (1..=5).map(|i| format!("dbd{tag}-run-{i}")).collect();
    let scripts: Vec<String> = (0..5).map(work).collect();
    let jobs: Vec<Job> = names
        .iter()
        .zip(&scripts)
        .map(|(n, s)| {
            Submit::new(n, s)
                .arg("--slurmwatch=1")
                .arg("--mem=512M")
                .arg("-t")
                .arg("5")
                .user(USER1)
                .submit()
        })
        .collect();
    for j in &jobs {
        assert_eq!(j.wait(WAIT).state, "COMPLETED", "{}", j.output());
    }
    // Each job's AdminComment is our summary, and it holds the file's own figures.
    for j in &jobs {
        let c = admin_comment(j);
        assert!(
            c.to_ascii_uppercase().starts_with("SW1:"),
            "job {}: {c}",
            j.id
        );
        let from_file = cli_json(&["report", &j.id.to_string(), "--json", "--no-log"]);
        assert_eq!(from_file["source"], "recorded_file");
        assert!(
            from_file["memory"]["peak_working_set_bytes"]
                .as_f64()
                .unwrap()
                > 90.0 * MIB,
            "{:#}",
            from_file["memory"]
        );
    }
    let reports_with_files: Vec<Value> = jobs
        .iter()
        .map(|j| cli_json(&["report", &j.id.to_string(), "--json", "--no-log"]))
        .collect();
    let until = format!("@{}", now() + 5);
    let workload = format!("dbd{tag}-run-#");
    let sizing = |label: &str| {
        let s = cli_json(&[
            "sizing",
            "-S",
            &since,
            "-E",
            &until,
            "-u",
            USER1,
            "--workload",
            &workload,
            "--json",
        ]);
        // The summaries in slurmdbd are used first: no file is opened for a run that has
        // one. (The window also holds other tests' jobs of this user, some with files.)
        let win = &s["window"];
        let n = |k: &str| {
            win[k]
                .as_u64()
                .unwrap_or_else(|| panic!("{label}: {win:#}"))
        };
        assert!(n("slurmdbd_summaries") >= 5, "{label}: {win:#}");
        assert!(
            n("recorded_files") + n("slurmdbd_summaries") <= n("jobs"),
            "{label}: {win:#}"
        );
        let w = s["workloads"][0].clone();
        assert_eq!(w["runs"], 5, "{label}: {s:#}");
        assert_eq!(w["recorded_runs"], 5, "{label}: {s:#}");
        let mem = w["advice"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["flag"] == "--mem")
            .unwrap_or_else(|| panic!("{label}: no --mem advice: {w:#}"))
            .clone();
        eprintln!("sizing --mem ({label}): {mem:#}");
        mem
    };
    let mem_with_files = sizing("files");

    let away = std::env::temp_dir().join(format!("slurmwatch-dbd-{}", std::process::id()));
    let _gone = FilesAway::new(&jobs.iter().map(|j| j.id).collect::<Vec<_>>(), &away);
    for (j, with_file) in jobs.iter().zip(&reports_with_files) {
        let r = cli_json(&["report", &j.id.to_string(), "--json", "--no-log"]);
        assert_eq!(r["source"], "slurmdbd_summary", "{:#}", r["notes"]);
        assert_eq!(r["file"], Value::Null);
        for key in [
            "peak_working_set_bytes",
            "lifetime_peak_bytes",
            "limit_bytes",
        ] {
            assert_eq!(
                r["memory"][key], with_file["memory"][key],
                "job {} memory.{key}",
                j.id
            );
        }
        assert_eq!(
            r["cpu"]["usage_seconds_total"],
            with_file["cpu"]["usage_seconds_total"]
        );
        assert_eq!(r["findings"], with_file["findings"], "job {}", j.id);
        let (code, text, err) = cli(&["report", &j.id.to_string(), "--no-log"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            text.contains("Source: the job's summary in slurmdbd (AdminComment"),
            "{text}"
        );
    }
    let mem_without = sizing("summaries only");
    assert_eq!(
        mem_with_files["basis"],
        "recorded working-set peak (5 recorded runs)"
    );
    assert!(
        mem_with_files["suggestion"].is_string(),
        "{mem_with_files:#}"
    );
    assert_eq!(mem_without, mem_with_files);
}

/// An AdminComment another tool (here jobstats' format) put on the job is left as it was,
/// and the report falls back to sacct with a file gone rather than misreading it.
#[test]
#[ignore]
fn slurmdbd_summary_never_overwrites_another_tools_admin_comment() {
    if !runs_in(
        "slurmdbd_summary_never_overwrites_another_tools_admin_comment",
        Phase::Cgroup,
    ) {
        return;
    }
    let _p = shared_plugstack();
    let _server = Server::start();
    let name = format!("dbdother{}", tag());
    let script = work(0) + "\nsleep 4";
    let job = Submit::new(&name, &script)
        .arg("--slurmwatch=1")
        .arg("-t")
        .arg("5")
        .user(USER1)
        .submit();
    job.wait_running(WAIT);
    let theirs = "JS1:H4sIAOtherToolsText";
    let o = run(
        "scontrol",
        &[
            "update",
            &format!("job={}", job.id),
            &format!("AdminComment={theirs}"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    // The EpilogSlurmctld has run once its line is in the log.
    let t = Instant::now();
    let line = loop {
        let log = std::fs::read_to_string("/var/log/slurm/ctld-epilog.log").unwrap_or_default();
        if let Some(l) = log
            .lines()
            .find(|l| l.contains(&format!("job {}:", job.id)))
        {
            break l.to_string();
        }
        assert!(t.elapsed() < Duration::from_secs(90), "no ctld-epilog line");
        std::thread::sleep(Duration::from_secs(1));
    };
    assert!(line.contains("another tool's text"), "{line}");
    assert_eq!(admin_comment(&job), theirs);
    let away = std::env::temp_dir().join(format!("slurmwatch-dbdo-{}", std::process::id()));
    let _gone = FilesAway::new(&[job.id], &away);
    let r = cli_json(&["report", &job.id.to_string(), "--json", "--no-log"]);
    assert_eq!(r["source"], "sacct_only", "{:#}", r["notes"]);
}
