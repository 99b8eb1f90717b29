//! Issue 37's attacks on the node endpoint (`slurmwatch metrics --listen`), performed on the
//! real cluster as a hostile user would, against the endpoint run as a site runs it (root,
//! the node's spool) and the cluster's real EpilogSlurmctld:
//! 2. another user asks for a job's summary and for `/metrics` (refused, and the summary
//!    refused before root runs `unmunge` or opens the job's file, seen with strace);
//! 3. a user floods the endpoint with silent connections for 60 s while a real job ends:
//!    Prometheus' and the controller's requests are answered within 2 s throughout and the
//!    job's summary is stored; a summary the controller misses (the endpoint down when the
//!    job ends) is stored by its retry;
//! 8. a spool file an earlier job with the same id left is not the new job's summary;
//! 10. a user's listener on `[::]:9944` beside the service (its bind fails).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use slurmwatch_core::analysis::admin_comment::Incarnation;
use slurmwatch_core::export::admin_comment_store::{self as export, NodeAnswer, Query, Verifier};
use slurmwatch_core::slurm::munge;
use slurmwatch_tests::*;

use crate::slurmdbd::{
    admin_comment, admin_comment_now, Server, CTLD_LOG, PORT_HELD, SUMMARY_PORT,
};

const WAIT: Duration = Duration::from_secs(300);
/// What the issue asks of the endpoint under a flood.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

fn id_of(user: &str, flag: &str) -> String {
    stdout(&run("id", &[flag, user])).trim().to_string()
}

/// `program` run as `user` (`setpriv` execs it: the child is the program).
fn as_user(user: &str, program: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={}", id_of(user, "-u")),
        &format!("--regid={}", id_of(user, "-g")),
        "--clear-groups",
        "--",
        program,
    ]);
    c
}

/// `curl` as `user`: (HTTP status, body). Status 0: no answer within `max`.
fn curl_as(user: &str, url: &str, headers: &[String], max: Duration) -> (u16, String) {
    let mut c = as_user(user, "curl");
    c.args([
        "-s",
        "-g",
        "--max-time",
        &max.as_secs().to_string(),
        "-w",
        "\n%{http_code}",
    ]);
    for h in headers {
        c.args(["-H", h]);
    }
    let o = c.arg(url).output().expect("run curl");
    let text = stdout(&o);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn endpoint(path: &str) -> String {
    format!("http://127.0.0.1:{SUMMARY_PORT}{path}")
}

/// A job of `USER1` recorded every second, running `script`, once its file is in the spool.
fn recorded_job(name: &str, script: &str) -> Job {
    let job = Submit::new(name, script)
        .arg("--slurmwatch=1")
        .arg("--mem=256M")
        .arg("-t")
        .arg("5")
        .user(USER1)
        .submit();
    job.wait_running(WAIT);
    let t = Instant::now();
    while !exists(&spool_file(job.id)) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "job {}: no file",
            job.id
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    job
}

/// The run of `job` as its file records it (what the controller would send).
fn run_of(job: u32) -> Incarnation {
    let r = slurmwatch_core::store::Reader::open(&spool_file(job)).unwrap();
    let meta = r.meta().unwrap();
    Incarnation {
        uid: meta.uid,
        start_unix: meta.started_unix_ms / 1000,
    }
}

/// The query string a request for `run` of a job carries.
fn query(run: Incarnation) -> String {
    format!(
        "nonce={}&uid={}&start={}",
        munge::new_nonce().unwrap(),
        run.uid,
        run.start_unix
    )
}

/// Asks the node's endpoint for `job`'s summary as the controller does (root's request
/// credential, the reply's checked).
fn ask_as_controller(job: u32, run: Incarnation, nodes: &[String]) -> NodeAnswer {
    let verifier = Verifier::default();
    let template = endpoint("/jobs/{job}/summary");
    let q = Query {
        template: &template,
        job_id: job,
        run,
        nodes,
        verifier: &verifier,
    };
    export::ask(&q, &nodes[0], Duration::from_secs(10))
}

/// The job's node (sacct's NodeList once it ran).
fn node_of(job: u32) -> String {
    let o = run(
        "squeue",
        &["-h", "-t", "all", "-j", &job.to_string(), "-o", "%N"],
    );
    let n = stdout(&o).trim().to_string();
    assert!(!n.is_empty(), "job {job}: no node");
    n
}

/// strace on the endpoint process (all its threads and children, the file opens and program
/// runs); detached on [`Trace::stop`].
struct Trace {
    child: Child,
    out: PathBuf,
}

impl Trace {
    fn start(pid: u32, name: &str) -> Trace {
        let out =
            std::env::temp_dir().join(format!("slurmwatch-strace-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&out);
        let child = Command::new("strace")
            .args(["-f", "-qq", "-e", "trace=execve,open,openat", "-o"])
            .arg(&out)
            .args(["-p", &pid.to_string()])
            .stderr(Stdio::null())
            .spawn()
            .expect("start strace");
        // Attached to every thread once the first lines could be written.
        std::thread::sleep(Duration::from_millis(1500));
        Trace { child, out }
    }

    /// Detaches (SIGINT) and returns what was seen.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

/// Attack 2: as `USER2`, `GET /jobs/<id>/summary` of `USER1`'s running job (with any nonce
/// and the right run, without a credential, then with `USER2`'s own munge credential over
/// exactly what the controller would sign) and `GET /metrics`: each refused, and root neither
/// runs `munge`/`unmunge` for the request without a credential nor opens the job's file for
/// either (strace on the endpoint). The controller's own request still gets the summary (and
/// strace sees that open: the trace would show the others).
#[cluster_test(Phase::Cgroup)]
fn hostile_endpoint_summary_and_metrics_refused_to_another_user() {
    let _p = shared_plugstack();
    let server = Server::start();
    let job = recorded_job(&format!("hep2{}", tag()), "sleep 30");
    let run = run_of(job.id);
    let file = spool_file(job.id).to_string_lossy().into_owned();
    let summary_url = |q: &str| endpoint(&format!("/jobs/{}/summary?{q}", job.id));

    let trace = Trace::start(server.pid(), "nocred");
    let (code, body) = curl_as(
        USER2,
        &summary_url(&query(run)),
        &[],
        Duration::from_secs(10),
    );
    let (mcode, mbody) = curl_as(USER2, &endpoint("/metrics"), &[], Duration::from_secs(10));
    let seen = trace.stop();
    assert_eq!(code, 401, "{USER2} got job {}'s summary: {body}", job.id);
    assert!(!body.contains(USER1), "{body}");
    assert_eq!(mcode, 403, "{USER2} read /metrics: {mbody}");
    assert!(!mbody.contains(&job.id.to_string()), "{mbody}");
    assert!(
        !seen.contains("execve("),
        "root ran a program for {USER2}:\n{seen}"
    );
    assert!(
        !seen.contains(&file),
        "root opened the job's file for {USER2}:\n{seen}"
    );

    // USER2's own credential over the very payload the controller signs.
    let nonce = munge::new_nonce().unwrap();
    let payload = munge::request_payload(job.id, run.uid, run.start_unix, &nonce);
    let own = as_user(USER2, "munge")
        .args(["-s", &payload])
        .output()
        .unwrap();
    assert!(own.status.success(), "{}", stderr(&own));
    let header = format!("{}: {}", munge::HEADER, stdout(&own).trim());
    let q = format!("nonce={nonce}&uid={}&start={}", run.uid, run.start_unix);
    let trace = Trace::start(server.pid(), "usercred");
    let (code, body) = curl_as(USER2, &summary_url(&q), &[header], Duration::from_secs(10));
    let seen = trace.stop();
    assert_eq!(code, 403, "{USER2} got job {}'s summary: {body}", job.id);
    assert!(body.contains("not root or SlurmUser"), "{body}");
    assert!(
        !seen.contains(&file),
        "root opened the job's file for {USER2}:\n{seen}"
    );

    // The controller (root here: the test cluster's SlurmUser) and root's scrape are served.
    let trace = Trace::start(server.pid(), "controller");
    let node = node_of(job.id);
    let answer = ask_as_controller(job.id, run, std::slice::from_ref(&node));
    let seen = trace.stop();
    assert!(matches!(answer, NodeAnswer::Recorded(_)), "{answer:?}");
    assert!(
        seen.contains(&file),
        "strace saw no open of {file}:\n{seen}"
    );
    let (code, text) = curl_as("root", &endpoint("/metrics"), &[], Duration::from_secs(10));
    assert_eq!(code, 200, "{text}");
    assert!(text.contains(&format!("jobid=\"{}\"", job.id)), "{text}");
    let _ = slurmwatch_tests::run("scancel", &[&job.id.to_string()]);
}

/// Opens a silent connection every `EVERY` s for `SECS` s and holds each for 10 s (about 200
/// open at once), loopback only; prints how many it opened.
const FLOOD: &str = r#"
import socket, sys, time
port, secs, every = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
held, opened, end = [], 0, time.time() + secs
while time.time() < end:
    try:
        held.append((time.time(), socket.create_connection(("127.0.0.1", port), timeout=1)))
        opened += 1
    except OSError:
        pass
    while held and time.time() - held[0][0] > 10:
        held.pop(0)[1].close()
    time.sleep(every)
print(opened)
"#;

fn ctld_log_offset() -> usize {
    std::fs::metadata(CTLD_LOG).map_or(0, |m| m.len() as usize)
}

/// Attack 3: `USER1` floods the endpoint with silent connections (one every 50 ms, four
/// times the issue's rate) for 60 s. Throughout, root's `/metrics` (Prometheus) is answered
/// every second within 2 s and the controller's request within 2 s, and a real job that
/// ends during the flood gets its summary stored by the cluster's EpilogSlurmctld.
#[cluster_test(Phase::Cgroup)]
fn hostile_endpoint_flood_by_a_user_does_not_silence_it() {
    let _p = shared_plugstack();
    let _server = Server::start();
    let job = recorded_job(&format!("hep3{}", tag()), "sleep 25");
    let run = run_of(job.id);
    let nodes = vec![node_of(job.id)];
    let dir = std::env::temp_dir().join(format!("slurmwatch-flood-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("flood.py");
    std::fs::write(&script, FLOOD).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let flood = as_user(USER1, "/usr/bin/python3")
        .arg(&script)
        .args([&SUMMARY_PORT.to_string(), "60", "0.05"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the flood");
    /// Stopped if the test fails before it ends by itself.
    struct Stop(Option<Child>);
    impl Drop for Stop {
        fn drop(&mut self) {
            if let Some(c) = self.0.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
    let mut flood = Stop(Some(flood));
    let started = Instant::now();
    let (mut scrapes, mut asks) = (Vec::new(), Vec::new());
    let mut i = 0u32;
    while started.elapsed() < Duration::from_secs(58) {
        let t = Instant::now();
        let (code, _) = curl_as("root", &endpoint("/metrics"), &[], Duration::from_secs(20));
        scrapes.push((code, t.elapsed()));
        if i % 5 == 2 {
            let t = Instant::now();
            let a = ask_as_controller(job.id, run, &nodes);
            asks.push((a, t.elapsed()));
        }
        i += 1;
        std::thread::sleep(Duration::from_secs(1).saturating_sub(t.elapsed()));
    }
    let flooding = matches!(flood.0.as_mut().map(|c| c.try_wait()), Some(Ok(None)));
    let out = flood.0.take().unwrap().wait_with_output().unwrap();
    let opened: u32 = stdout(&out).trim().parse().unwrap_or(0);
    eprintln!("flood: {opened} connections opened; scrapes {scrapes:?}");
    assert!(scrapes.len() >= 30, "{scrapes:?}");
    for (code, took) in &scrapes {
        assert!(
            *code == 200 && *took < ANSWER_WITHIN,
            "a scrape under the flood: {code} after {took:?}; all: {scrapes:?}"
        );
    }
    assert!(asks.len() >= 6, "{asks:?}");
    for (a, took) in &asks {
        assert!(
            matches!(a, NodeAnswer::Recorded(_)) && *took < ANSWER_WITHIN,
            "the controller under the flood: {a:?} after {took:?}"
        );
    }
    assert!(flooding, "the flood ended early: {}", stderr(&out));
    assert!(opened > 500, "the flood opened only {opened} connections");
    // The job ended during the flood; its EpilogSlurmctld stored the summary.
    let done = job.wait(WAIT);
    assert_eq!(done.state, "COMPLETED", "{}", job.output());
    let c = admin_comment(&job);
    assert!(
        c.starts_with("JS1:") && slurmwatch_core::analysis::admin_comment::is_ours(&c),
        "job {}: {c}",
        job.id
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Attack 3, the summary nearly missed: the node's endpoint is busy (503, as past its caps)
/// when the job ends and free 4 s later; the controller asks again within its bound and
/// stores the summary.
#[cluster_test(Phase::Cgroup)]
fn hostile_endpoint_busy_at_the_end_is_stored_by_the_retry() {
    let _p = shared_plugstack();
    // The port stays ours from now on: no other test's server answers in the window.
    let held = PORT_HELD.lock().unwrap_or_else(|e| e.into_inner());
    let offset = ctld_log_offset();
    let busy = Busy::start();
    let job = Submit::new(&format!("hep3r{}", tag()), "sleep 3")
        .arg("--slurmwatch=1")
        .arg("--mem=256M")
        .arg("-t")
        .arg("5")
        .user(USER1)
        .submit();
    // Ended as slurmctld sees it: its EpilogSlurmctld runs now, and the job stays COMPLETING
    // until that ends (sacct may learn of the end later still).
    let t = Instant::now();
    loop {
        let o = run(
            "squeue",
            &["-h", "-t", "all", "-j", &job.id.to_string(), "-o", "%T"],
        );
        let state = stdout(&o).trim().to_string();
        if !["PENDING", "CONFIGURING", "RUNNING"].contains(&state.as_str()) {
            break;
        }
        assert!(t.elapsed() < WAIT, "job {} did not end: {state}", job.id);
        std::thread::sleep(Duration::from_millis(200));
    }
    let t = Instant::now();
    // Within the controller's retry window (two thirds of SLURMWATCH_TIMEOUT).
    std::thread::sleep(Duration::from_secs(4));
    let job_lines = || -> Vec<String> {
        let log = std::fs::read(CTLD_LOG).unwrap_or_default();
        String::from_utf8_lossy(log.get(offset..).unwrap_or_default())
            .lines()
            .filter(|l| l.contains(&format!("job {}:", job.id)))
            .map(String::from)
            .collect()
    };
    // Busy: the EpilogSlurmctld was answered 503 and has neither stored nor given up (it
    // logs one line per job when it ends).
    let early = job_lines();
    assert!(
        early.is_empty(),
        "the EpilogSlurmctld ended within {:?} of the job: {early:?}",
        t.elapsed()
    );
    let busy_answers = busy.stop();
    assert!(
        busy_answers
            .iter()
            .any(|r| r.starts_with(&format!("GET /jobs/{}/summary?", job.id))),
        "the controller never asked while the node was busy: {busy_answers:?}"
    );
    let _server = Server::start_held("127.0.0.1", held);
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    let c = admin_comment(&job);
    assert!(
        c.starts_with("JS1:") && slurmwatch_core::analysis::admin_comment::is_ours(&c),
        "job {}: {c}",
        job.id
    );
    let t = Instant::now();
    let mut lines = job_lines();
    while lines.is_empty() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(500));
        lines = job_lines();
    }
    assert!(
        lines.iter().any(|l| l.contains("stored in AdminComment")),
        "{lines:?}"
    );
}

/// The summary port answering every request `503`, as an endpoint past its connection caps
/// does; [`Busy::stop`] closes it and gives the request lines it answered.
struct Busy {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<String>>,
}

impl Busy {
    fn start() -> Busy {
        use std::io::{BufRead, Write};
        use std::sync::atomic::Ordering;
        let l = std::net::TcpListener::bind(("127.0.0.1", SUMMARY_PORT))
            .unwrap_or_else(|e| panic!("port {SUMMARY_PORT}: {e}"));
        l.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut asked = Vec::new();
            while !stopping.load(Ordering::SeqCst) {
                let Ok((c, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                c.set_nonblocking(false).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                // The whole head before the answer: closing with unread bytes resets the
                // connection, and the controller takes a reset for no answer (seen once).
                let mut reader = std::io::BufReader::new(&c);
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 0) && header.trim() != "" {
                    header.clear();
                }
                let _ = (&c).write_all(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbusy\n",
                );
                asked.push(line);
            }
            asked
        });
        Busy { stop, thread }
    }

    fn stop(self) -> Vec<String> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// Whether any `slurmwatch ctld-epilog` is running (the EpilogSlurmctld of a job).
fn ctld_epilog_running() -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("ctld-epilog"))
    })
}

/// Places a spool file, as root (the plugin's own writer), for job `id` of `uid`, started at
/// `started_unix_ms` on `node`, with a finished batch step.
fn place_stale_file(id: u32, user: &str, uid: u32, node: &str, started_unix_ms: i64) -> PathBuf {
    use slurmwatch_core::sample::Source;
    use slurmwatch_core::store::{JobMeta, Writer};
    let meta = JobMeta {
        job_id: u64::from(id),
        user: user.into(),
        uid,
        node: node.into(),
        cluster: None,
        plugin_version: "stale".into(),
        interval_seconds: 1,
        source: Source::CgroupV1,
        cores_allocated: Some(1),
        memory_allocated_bytes: Some(256 << 20),
        started_unix_ms,
        incarnation: None,
    };
    let path = spool_file(id);
    assert!(!exists(&path), "{} is already there", path.display());
    let mut w = Writer::create(&path, &meta).unwrap();
    w.begin_step("batch", started_unix_ms, Some(1)).unwrap();
    w.end_step("batch", started_unix_ms + 60_000, Some(0))
        .unwrap();
    w.close().unwrap();
    path
}

/// Attack 8: job ids are reused (a wiped or restored controller). A spool file an earlier
/// job with the next ids left — `USER2`'s, and `USER1`'s own from an hour before — is on the
/// node when `USER1`'s unrecorded jobs get those ids: the endpoint answers the controller
/// "not recorded" for each new run, and no AdminComment is stored.
#[cluster_test(Phase::Cgroup)]
fn hostile_endpoint_stale_spool_file_is_not_the_new_jobs_summary() {
    let _p = shared_plugstack();
    let _server = Server::start();
    let probe = Submit::new(&format!("hep8p{}", tag()), "true")
        .user(USER1)
        .submit();
    assert_eq!(probe.wait(WAIT).state, "COMPLETED", "{}", probe.output());
    let node = node_of(probe.id);
    let hour_ago = (now() - 3600) * 1000;
    let (uid1, uid2) = (
        id_of(USER1, "-u").parse().unwrap(),
        id_of(USER2, "-u").parse().unwrap(),
    );
    let planted = [
        place_stale_file(probe.id + 1, USER2, uid2, &node, hour_ago),
        place_stale_file(probe.id + 2, USER1, uid1, &node, hour_ago),
    ];
    struct Remove<'a>(&'a [PathBuf]);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            for p in self.0 {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    let _remove = Remove(&planted);
    for (k, want) in [(1, probe.id + 1), (2, probe.id + 2)] {
        let job = Submit::new(&format!("hep8-{k}{}", tag()), "true")
            .user(USER1)
            .submit();
        assert_eq!(
            job.id, want,
            "another job took id {want}: the planted file is not in its way"
        );
        assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
        // The controller's request for this run, as its EpilogSlurmctld sends it.
        let start = stdout(&run(
            "sacct",
            &["-j", &job.id.to_string(), "-X", "-n", "-P", "-o", "Start"],
        ));
        let start_unix = slurmwatch_core::slurm::sacct::parse_time(start.trim()).unwrap();
        let this_run = Incarnation {
            uid: uid1,
            start_unix,
        };
        let a = ask_as_controller(job.id, this_run, std::slice::from_ref(&node));
        assert_eq!(
            a,
            NodeAnswer::NotRecorded,
            "job {}: the stale file was served",
            job.id
        );
        let t = Instant::now();
        std::thread::sleep(Duration::from_secs(3));
        while ctld_epilog_running() {
            assert!(
                t.elapsed() < Duration::from_secs(90),
                "the EpilogSlurmctld did not end"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        assert_eq!(
            admin_comment_now(&job),
            "",
            "job {}: an earlier job's summary was stored as this one's",
            job.id
        );
    }
    assert!(
        planted.iter().all(|p| exists(p)),
        "the planted files are gone: nothing was tested"
    );
}

/// Tries, as `USER1`, to listen on the summary port at each address (IPv6 ones with
/// IPV6_V6ONLY, as a user beside an IPv4 listener would); prints `<addr> bound` or
/// `<addr> refused <errno>` per line.
const SQUAT: &str = r#"
import socket, sys
port = int(sys.argv[1])
for fam, addr in [(socket.AF_INET6, "::"), (socket.AF_INET6, "::1"), (socket.AF_INET, "0.0.0.0"), (socket.AF_INET, "127.0.0.1")]:
    s = socket.socket(fam, socket.SOCK_STREAM)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((addr, port))
        s.listen(1)
        print(addr, "bound")
    except OSError as e:
        print(addr, "refused", e.errno)
    s.close()
"#;

/// Attack 10 (first half): with the endpoint listening as a site runs it for a remote
/// controller (`--listen 0.0.0.0:9944`), `USER1` cannot listen on `[::]:9944` (or any other
/// address of the port) to answer IPv6 clients, and the endpoint itself answers them.
#[cluster_test(Phase::Cgroup)]
fn hostile_endpoint_users_listener_beside_the_service_fails() {
    // submits no job: a user's bind beside the service's, nothing else.
    assert!(
        Path::new("/proc/net/if_inet6").exists(),
        "this host has no IPv6: the attack cannot be performed here"
    );
    let server = Server::start_on("0.0.0.0");
    let dir = std::env::temp_dir().join(format!("slurmwatch-squat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = dir.join("squat.py");
    std::fs::File::create(&script)
        .unwrap()
        .write_all(SQUAT.as_bytes())
        .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = as_user(USER1, "/usr/bin/python3")
        .arg(&script)
        .arg(SUMMARY_PORT.to_string())
        .output()
        .unwrap();
    let said = stdout(&o);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(said.lines().count(), 4, "{said}");
    for line in said.lines() {
        assert!(
            line.contains("refused 98"),
            "{USER1} took the port: {line}\n{said}"
        );
    }
    let (code, body) = curl_as(
        "root",
        &format!("http://[::1]:{SUMMARY_PORT}/metrics"),
        &[],
        Duration::from_secs(10),
    );
    assert_eq!(code, 200, "{body}");
    drop(server);
}
