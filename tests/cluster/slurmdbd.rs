//! Every job's summary in slurmdbd (issue 16): the node serves a finished job's summary on
//! `slurmwatch metrics --listen` (`GET /jobs/<id>/summary`), the cluster's EpilogSlurmctld
//! (the shipped contrib/slurmctld-epilog.sh, configured by scripts/cluster.sh to ask
//! 127.0.0.1:9944) stores it as the job's AdminComment (jobstats' `JS1:` format, through
//! slurmwatch-dbd-comment), and `report`, `history`
//! and `sizing` read it from sacct with every file moved away. Also: another tool's
//! AdminComment is left as it was.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::Value;
use slurmwatch_tests::*;

const WAIT: Duration = Duration::from_secs(600);
/// scripts/cluster.sh's CTLD_SUMMARY_PORT.
pub(crate) const SUMMARY_PORT: u16 = 9944;
const MIB: f64 = 1024.0 * 1024.0;

/// The node's summary server, as a site runs it (root, the node's spool); stopped on drop.
/// One at a time (it has the port the cluster's EpilogSlurmctld asks).
pub struct Server(
    Child,
    #[allow(dead_code)] std::sync::MutexGuard<'static, ()>,
);

pub static PORT_HELD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Nothing else listens on the summary port: a leftover listener (a killed test run's server)
/// would answer in place of the one a test starts.
fn assert_port_free() {
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", SUMMARY_PORT)).is_ok(),
        "port {SUMMARY_PORT} is held by another process (`ss -ltnp` names it)"
    );
}

impl Server {
    pub fn start() -> Server {
        Server::start_on("127.0.0.1")
    }

    /// Listening on `ip` (e.g. `0.0.0.0`, as a site runs it for a remote controller).
    pub fn start_on(ip: &str) -> Server {
        Server::start_held(ip, PORT_HELD.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// As [`Server::start_on`], for a test that already holds the port (it kept it free
    /// before starting the server).
    pub fn start_held(ip: &str, held: std::sync::MutexGuard<'static, ()>) -> Server {
        assert_port_free();
        let child = Command::new(slurmwatch_bin())
            .args(["metrics", "--spool", SPOOL, "--listen"])
            .arg(format!("{ip}:{SUMMARY_PORT}"))
            .spawn()
            .expect("start slurmwatch metrics");
        let mut s = Server(child, held);
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", SUMMARY_PORT)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the server did not listen"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // A listener that is not ours (a leftover from a killed run) would answer in its place.
        assert!(
            matches!(s.0.try_wait(), Ok(None)),
            "the server exited: port {SUMMARY_PORT} is held by another process"
        );
        s
    }
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.0.id()
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

/// One field of the job's allocation line in `sacct` (empty for none).
pub(crate) fn sacct_job_field(job: &Job, field: &str) -> String {
    let id = job.id.to_string();
    let o = run("sacct", &["-j", &id, "-X", "-n", "-P", "-o", field]);
    stdout(&o).trim().to_string()
}

/// What slurmdbd holds as the job's AdminComment now (`sacct`; empty for none).
pub(crate) fn admin_comment_now(job: &Job) -> String {
    sacct_job_field(job, "AdminComment")
}

/// `sacct -o AdminComment` for the job, once the EpilogSlurmctld has stored it.
pub fn admin_comment(job: &Job) -> String {
    let t = Instant::now();
    loop {
        let c = admin_comment_now(job);
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

#[cluster_test(Phase::Cgroup)]
fn slurmdbd_summary_reaches_sacct_and_serves_report_and_sizing_without_files() {
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
            c.starts_with("JS1:") && slurmwatch_core::analysis::admin_comment::is_ours(&c),
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
    without_dbd_comment_the_older_format_is_chosen(&jobs[0]);
    let reports_with_files: Vec<Value> = jobs
        .iter()
        .map(|j| cli_json(&["report", &j.id.to_string(), "--json", "--no-log"]))
        .collect();
    let until = format!("@{}", now() + 5);
    let workload = format!("dbd{tag}-run-#");
    let sizing = |label: &str| {
        let s = sizing_json(&since, &until, USER1, &workload);
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

/// ctld-epilog where no slurmwatch-dbd-comment is installed (the binary alone in a directory):
/// sacctmgr would store, and 22.05's lowercases the value, so the summary is the older `SW1:`
/// with the same figures, and the log line says why (issue 38; 24.11 and 26.05, whose sacctmgr
/// keeps the case, store `JS1:` that way: the VM tier checks it on 26.05).
fn without_dbd_comment_the_older_format_is_chosen(job: &Job) {
    let dir = job_dir(&format!("no-dbd-comment-{}", job.id));
    let alone = dir.join("slurmwatch");
    std::fs::copy(slurmwatch_bin(), &alone).unwrap();
    let node = stdout(&run(
        "sacct",
        &[
            "-j",
            &job.id.to_string(),
            "-X",
            "-n",
            "-P",
            "-o",
            "NodeList",
        ],
    ))
    .trim()
    .to_string();
    let o = Command::new(&alone)
        .args([
            "ctld-epilog",
            "--job",
            &job.id.to_string(),
            "--nodes",
            &node,
        ])
        .args(["--timeout", "30", "--dry-run"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("in the older SW1: format")
            && stderr(&o).contains("Slurm 22.05's sacctmgr lowercases it"),
        "{}",
        stderr(&o)
    );
    let sw1 = stdout(&o).trim().to_string();
    assert!(sw1.starts_with("SW1:"), "{sw1}");
    use slurmwatch_core::analysis::admin_comment::decode;
    let (older, stored) = (decode(&sw1).unwrap(), decode(&admin_comment(job)).unwrap());
    assert_eq!(
        older.nodes[0].summary.peak_working_set_bytes,
        stored.nodes[0].summary.peak_working_set_bytes
    );
}

/// An AdminComment another tool (here jobstats' format) put on the job is left as it was,
/// and the report falls back to sacct with a file gone rather than misreading it.
#[cluster_test(Phase::Cgroup)]
fn slurmdbd_summary_never_overwrites_another_tools_admin_comment() {
    let _p = shared_plugstack();
    let _server = Server::start();
    let log_offset = std::fs::metadata(CTLD_LOG).map_or(0, |m| m.len() as usize);
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
    // The race CI once lost, made certain: slurmctld passes an AdminComment on to slurmdbd
    // only with the job's end (22.05), so while the job runs slurmdbd alone says "none" and
    // a store that asked it alone would write over the other tool's text.
    assert_eq!(
        admin_comment_now(&job),
        "",
        "slurmdbd already has it: no race to test"
    );
    let node = stdout(&run(
        "squeue",
        &["-h", "-j", &job.id.to_string(), "-o", "%N"],
    ))
    .trim()
    .to_string();
    let mut epilog = Command::new(slurmwatch_bin());
    epilog.args([
        "ctld-epilog",
        "--job",
        &job.id.to_string(),
        "--nodes",
        &node,
    ]);
    let o = epilog.args(["--timeout", "30"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("another tool's text"), "{}", stderr(&o));
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    // The EpilogSlurmctld has run once its line is in the log.
    let line = ctld_lines(job.id, log_offset).remove(0);
    assert!(line.contains("another tool's text"), "{line}");
    assert_eq!(admin_comment(&job), theirs);
    let away = std::env::temp_dir().join(format!("slurmwatch-dbdo-{}", std::process::id()));
    let _gone = FilesAway::new(&[job.id], &away);
    let r = cli_json(&["report", &job.id.to_string(), "--json", "--no-log"]);
    assert_eq!(r["source"], "sacct_only", "{:#}", r["notes"]);
}

/// A user's listener on the summary port (the real endpoint down), as `USER1`: it answers
/// `GET /jobs/<id>/summary` with `<dir>/<id>.json` and, when there is one, the credential in
/// `<dir>/<id>.cred`. Stopped on drop.
struct Forger {
    child: Child,
    dir: PathBuf,
    #[allow(dead_code)]
    held: std::sync::MutexGuard<'static, ()>,
}

const FORGER: &str = r#"
import socket, sys
d, port = sys.argv[1], int(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(16)

def answer(c):
    req = b""
    while b"\r\n\r\n" not in req:
        b = c.recv(4096)
        if not b:
            return None
        req += b
    parts = req.split(b" ")
    path = parts[1].decode() if len(parts) > 1 else ""
    job = path.split("/")[2] if path.startswith("/jobs/") else "none"
    try:
        body = open(f"{d}/{job}.json", "rb").read()
    except OSError:
        c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        return None
    try:
        hdr = "X-Slurmwatch-Munge: " + open(f"{d}/{job}.cred").read().strip() + "\r\n"
    except OSError:
        hdr = ""
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{hdr}Connection: close\r\n\r\n"
    c.sendall(head.encode() + body)

while True:
    c, _ = s.accept()
    try:
        answer(c)
    except OSError:
        pass  # a client gone (the readiness probe)
    c.close()
"#;

/// `setpriv` to `USER1` (it execs: the child is the program itself, so a kill stops it).
fn as_user1(program: &str) -> Command {
    let uid = stdout(&run("id", &["-u", USER1])).trim().to_string();
    let gid = stdout(&run("id", &["-g", USER1])).trim().to_string();
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={uid}"),
        &format!("--regid={gid}"),
        "--clear-groups",
        "--",
        program,
    ]);
    c
}

impl Forger {
    /// `held`: the port, taken before the jobs it answers for were submitted (they must not
    /// end while another test's real endpoint has it).
    fn start(held: std::sync::MutexGuard<'static, ()>) -> Forger {
        let dir = std::env::temp_dir().join(format!("slurmwatch-forger-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = dir.join("forger.py");
        std::fs::write(&script, FORGER).unwrap();
        assert_port_free();
        // The system's python: a user's PATH may lead to one the user cannot run.
        let child = as_user1("/usr/bin/python3")
            .arg(&script)
            .arg(&dir)
            .arg(SUMMARY_PORT.to_string())
            .spawn()
            .expect("start the forger");
        let f = Forger { child, dir, held };
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", SUMMARY_PORT)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the forger did not listen"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut f = f;
        // Its bind failed if it is gone: the probe then reached another process's listener.
        assert!(
            matches!(f.child.try_wait(), Ok(None)),
            "the forger exited: port {SUMMARY_PORT} is held by another process"
        );
        f
    }

    fn serve(&self, job: u32, body: &[u8], credential: Option<&str>) {
        std::fs::write(self.dir.join(format!("{job}.json")), body).unwrap();
        if let Some(c) = credential {
            std::fs::write(self.dir.join(format!("{job}.cred")), c).unwrap();
        }
    }
}

impl Drop for Forger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `program` (munge, unmunge) with `input` on stdin.
fn piped(mut c: Command, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

pub(crate) const CTLD_LOG: &str = "/var/log/slurm/ctld-epilog.log";

/// The job's ctld-epilog log lines past `offset` (job ids restart after a wipe), once there
/// is one.
pub(crate) fn ctld_lines(job: u32, offset: usize) -> Vec<String> {
    let t = Instant::now();
    loop {
        let log = std::fs::read(CTLD_LOG).unwrap_or_default();
        let lines: Vec<String> = String::from_utf8_lossy(log.get(offset..).unwrap_or_default())
            .lines()
            .filter(|l| l.contains(&format!("job {job}:")))
            .map(String::from)
            .collect();
        if !lines.is_empty() {
            return lines;
        }
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "job {job}: no ctld-epilog line"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A user who binds the summary port while the node's endpoint is down cannot put a summary
/// into slurmdbd: a forged summary with no credential, with one the user's own `munge` made
/// (uid not 0), and a real reply whose credential was already used (replayed) are each
/// refused with a line that says why, and no AdminComment is stored.
#[cluster_test(Phase::Cgroup)]
fn slurmdbd_summary_from_a_users_listener_is_refused() {
    use slurmwatch_core::export::admin_comment_store as export;
    use slurmwatch_core::slurm::munge;
    let _p = shared_plugstack();
    // The user's listener has the port before any of the jobs can end.
    let forger = Forger::start(PORT_HELD.lock().unwrap_or_else(|e| e.into_inner()));
    let tag = tag();
    let log_offset = std::fs::metadata(CTLD_LOG).map_or(0, |m| m.len() as usize);
    let jobs: Vec<Job> = ["none", "user", "replay", "kept"]
        .iter()
        .map(|k| {
            Submit::new(&format!("dbdforge{tag}-{k}"), "sleep 20")
                .arg("--slurmwatch=1")
                .arg("--mem=256M")
                .arg("-t")
                .arg("5")
                .user(USER1)
                .submit()
        })
        .collect();
    // Each job's forgery is made while it runs (the cluster may run them in turn), from its
    // real summary as root reads it.
    for (i, j) in jobs.iter().enumerate() {
        j.wait_running(WAIT);
        let t = Instant::now();
        let real = loop {
            use slurmwatch_core::analysis::admin_comment::Incarnation;
            use slurmwatch_core::report::node_summary::{from_spool, Spooled};
            // The run the file records (the controller sends Slurm's).
            let run = slurmwatch_core::store::Reader::open(&spool_file(j.id))
                .and_then(|r| r.meta())
                .ok()
                .map(|m| Incarnation {
                    uid: m.uid,
                    start_unix: m.started_unix_ms / 1000,
                });
            if let Some(Ok(Spooled::Recorded(n))) =
                run.map(|r| from_spool(Path::new(SPOOL), j.id, r))
            {
                break *n;
            }
            assert!(
                t.elapsed() < Duration::from_secs(15),
                "job {}: no file",
                j.id
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        let mut forged = real.clone();
        forged.summary.peak_working_set_bytes = Some(1);
        let forged = serde_json::to_vec(&forged).unwrap();
        match i {
            // No credential.
            0 => forger.serve(j.id, &forged, None),
            // The user's own munge over the payload the controller expects.
            1 => {
                // (Its listener could sign the controller's own nonce too: munge still says
                // who made the credential.)
                let nonce = munge::new_nonce().unwrap();
                let own = piped(
                    as_user1("munge"),
                    munge::summary_payload(j.id, &real.meta.node, &nonce, &forged).as_bytes(),
                );
                assert!(own.status.success(), "{}", stderr(&own));
                forger.serve(j.id, &forged, Some(stdout(&own).trim()));
            }
            // A real signed reply, fetched from the node's endpoint while it was up (another
            // port here): already decoded once, as the controller would have (2), or kept
            // and never decoded (3: munge alone would take it once, within its TTL; the
            // controller's nonce for its own request is what refuses it).
            _ => {
                let mut real_server = Command::new(slurmwatch_bin())
                    .args(["metrics", "--spool", SPOOL, "--listen", "127.0.0.1:9946"])
                    .spawn()
                    .unwrap();
                // Asked as the controller asks (root's request credential).
                let run = slurmwatch_core::analysis::admin_comment::Incarnation {
                    uid: real.meta.uid,
                    start_unix: real.meta.started_unix_ms / 1000,
                };
                let t = Instant::now();
                let r = loop {
                    let nonce = munge::new_nonce().unwrap();
                    let url = export::with_query(
                        &format!("http://127.0.0.1:9946/jobs/{}/summary", j.id),
                        run,
                        &nonce,
                    );
                    let payload = munge::request_payload(j.id, run.uid, run.start_unix, &nonce);
                    let asked = munge::sign("munge", &payload, munge::TIMEOUT).unwrap();
                    match export::get(&url, &[(munge::HEADER, &asked)], Duration::from_secs(10)) {
                        Ok(r) => break r,
                        Err(e) => assert!(t.elapsed() < Duration::from_secs(10), "{e}"),
                    }
                    std::thread::sleep(Duration::from_millis(100));
                };
                let _ = real_server.kill();
                let _ = real_server.wait();
                assert_eq!(r.code, 200, "{}", String::from_utf8_lossy(&r.body));
                let cred = r.credential.clone().expect("the real endpoint signs");
                if i == 2 {
                    let first = piped(Command::new("unmunge"), cred.as_bytes());
                    assert!(first.status.success(), "{}", stderr(&first));
                }
                forger.serve(j.id, &r.body, Some(&cred));
            }
        }
        // The forger answers for the job, which is still running.
        let url = format!("http://127.0.0.1:{SUMMARY_PORT}/jobs/{}/summary", j.id);
        let r = export::get(&url, &[], Duration::from_secs(10)).unwrap();
        assert_eq!(r.code, 200, "job {}", j.id);
        let q = run("squeue", &["-h", "-j", &j.id.to_string(), "-o", "%T"]);
        assert_eq!(stdout(&q).trim(), "RUNNING", "job {}: ended too soon", j.id);
    }
    for j in &jobs {
        assert_eq!(j.wait(WAIT).state, "COMPLETED", "{}", j.output());
    }
    let why = [
        "no munge credential",
        "not root",
        "Replayed credential",
        "not this reply",
    ];
    for (j, why) in jobs.iter().zip(why) {
        let lines = ctld_lines(j.id, log_offset);
        assert!(
            lines
                .iter()
                .any(|l| l.contains("summary refused, not stored") && l.contains(why)),
            "job {}: {lines:#?}",
            j.id
        );
        let o = run(
            "sacct",
            &[
                "-j",
                &j.id.to_string(),
                "-X",
                "-n",
                "-P",
                "-o",
                "AdminComment",
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stdout(&o).trim(), "", "job {}: stored", j.id);
    }
}

/// Issue 36, part 3: the node's endpoint is down when a recorded job ends. The controller's
/// EpilogSlurmctld logs the job, the node and why, and stores nothing; once the endpoint is
/// back, `slurmwatch ctld-backfill` over the window stores the job's summary, and `report`
/// reads it from slurmdbd with the job's file moved away.
#[cluster_test(Phase::Cgroup)]
fn slurmdbd_backfill_stores_a_summary_missed_while_the_endpoint_was_down() {
    let _p = shared_plugstack();
    // The port stays free (no test's server) until this test starts its own.
    let held = PORT_HELD.lock().unwrap_or_else(|e| e.into_inner());
    assert_port_free();
    let offset = std::fs::metadata(CTLD_LOG).map_or(0, |m| m.len() as usize);
    let since = format!("@{}", now() - 5);
    let job = Submit::new(&format!("dbdbf{}", tag()), &work(2))
        .arg("--slurmwatch=1")
        .arg("--mem=512M")
        .arg("-t")
        .arg("5")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    // The EpilogSlurmctld ran (the job is no longer COMPLETING once it has) and said why.
    let node = crate::site::node_list(&job);
    let t = Instant::now();
    let lines = loop {
        let log = std::fs::read(CTLD_LOG).unwrap_or_default();
        let lines: Vec<String> = String::from_utf8_lossy(log.get(offset..).unwrap_or_default())
            .lines()
            .filter(|l| l.contains(&format!("job {}:", job.id)))
            .map(String::from)
            .collect();
        if !lines.is_empty() || t.elapsed() > Duration::from_secs(90) {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("node {node}: no summary: ")) && l.contains("refused")),
        "{lines:?}"
    );
    assert_eq!(
        admin_comment_now(&job),
        "",
        "nothing stored while the node was down"
    );

    let _server = Server::start_held("127.0.0.1", held);
    let until = format!("@{}", now() + 5);
    let o = Command::new(slurmwatch_bin())
        .args(["ctld-backfill", "--since", &since, "--until", &until])
        .args(["--jobs", &job.id.to_string()])
        .args([
            "--url",
            &format!("http://127.0.0.1:{SUMMARY_PORT}/jobs/{{job}}/summary"),
        ])
        .output()
        .expect("run slurmwatch ctld-backfill");
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(
        out.contains(&format!(
            "job {}: summary of 1 of 1 node(s) stored in AdminComment",
            job.id
        )),
        "{out}"
    );
    assert!(
        out.contains("1 finished job(s) without a whole summary in the window: 1 stored"),
        "{out}"
    );
    let c = admin_comment(&job);
    assert!(
        c.starts_with("JS1:") && slurmwatch_core::analysis::admin_comment::is_ours(&c),
        "job {}: {c}",
        job.id
    );
    let with_file = cli_json(&["report", &job.id.to_string(), "--json", "--no-log"]);
    assert_eq!(with_file["source"], "recorded_file");
    let away = std::env::temp_dir().join(format!("slurmwatch-bf-{}", std::process::id()));
    let _gone = FilesAway::new(&[job.id], &away);
    let r = cli_json(&["report", &job.id.to_string(), "--json", "--no-log"]);
    assert_eq!(r["source"], "slurmdbd_summary", "{:#}", r["notes"]);
    assert_eq!(
        r["memory"]["peak_working_set_bytes"],
        with_file["memory"]["peak_working_set_bytes"]
    );
    // Asked again: nothing is missing any more, and nothing is overwritten.
    let o = Command::new(slurmwatch_bin())
        .args(["ctld-backfill", "--since", &since, "--until", &until])
        .args(["--jobs", &job.id.to_string()])
        .output()
        .expect("run slurmwatch ctld-backfill");
    assert!(
        stdout(&o).contains("0 finished job(s) without a whole summary"),
        "{}",
        stdout(&o)
    );
    assert_eq!(admin_comment_now(&job), c);
}
