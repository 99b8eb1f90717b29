//! The controller's half of "every job's summary in slurmdbd": run from `EpilogSlurmctld`
//! (as SlurmUser, on the slurmctld host), it asks each node of the finished job for its
//! summary over the node's `slurmwatch metrics --listen` endpoint
//! (`GET /jobs/<id>/summary`), joins them into one `JS1:` string in jobstats' format
//! (`analysis::admin_comment`) and stores it as the job's `AdminComment` through slurmdbd's
//! API (`slurmwatch-dbd-comment`, which keeps its case), or with `sacctmgr` as jobstats does
//! where that is missing. Nothing here runs on a compute node, so no node's epilog ever calls
//! a Slurm command.
//!
//! The request carries this process's munge credential (made as SlurmUser) over the job, the
//! run asked for (the job's uid and Slurm's start time: a file an earlier job with the same
//! id left is not this job's) and a fresh nonce: a node serves a summary to nothing else.
//! A node's reply counts only when it carries root's munge credential over its job, node,
//! nonce and body ([`accept`], `slurm::munge`): a user's listener on a node's port cannot
//! put a summary into slurmdbd.
//!
//! Every wait has a deadline: each node's answer ([`NODE_TIMEOUT`], nodes asked at once, a
//! busy node (HTTP 503: past its connection caps, its file not readable yet) asked again every
//! [`RETRY_PAUSE`] until the caller's collection deadline), and the store (retried until slurmdbd has the job record, within the caller's
//! deadline). An
//! AdminComment another tool wrote (jobstats' `JS1:`, an admin's note) is never overwritten:
//! it is looked for in slurmctld (which may not have passed an `scontrol update` on to
//! slurmdbd yet) and in slurmdbd.
//!
//! The HTTP client is written here on `std::net` (no client crate): one `GET` to our own
//! server (`export::http`), `Connection: close`, the body capped at [`MAX_REPLY_BYTES`].

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::analysis::admin_comment::{self as record, Incarnation, JobSummaryRecord, NodeSummary};
use crate::slurm::release::{self, Release};
use crate::slurm::{command, munge};

/// How long one node may take to answer (connect, request, whole reply).
pub const NODE_TIMEOUT: Duration = Duration::from_secs(10);
/// The pause before a busy node (HTTP 503) is asked again.
pub const RETRY_PAUSE: Duration = Duration::from_secs(2);
/// The largest reply read from a node.
pub const MAX_REPLY_BYTES: u64 = 8 << 20;
/// The default URL of a node's summary: `{node}` is Slurm's node name, `{job}` the job id.
pub const DEFAULT_URL: &str = "http://{node}:9944/jobs/{job}/summary";

/// What one node said.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeAnswer {
    Recorded(Box<NodeSummary>),
    /// The node answered that the job was not recorded there.
    NotRecorded,
    /// The node's endpoint is up but busy (HTTP 503; one sentence): asked again while the
    /// deadline allows.
    Busy(String),
    /// No usable answer (one sentence: refused connection, unreachable, timed out, cut
    /// short): not asked again. A node without an endpoint refuses at once, and slurmctld
    /// holds the job, and its nodes, COMPLETING until this ends: asking such a node again for
    /// the whole bound held every job 40 s on the test cluster.
    Failed(String),
    /// A summary that is not authenticated as the node's or not this run's, or a node that
    /// refused the request (one sentence: why; the caller names the node): never stored,
    /// not asked again.
    Refused(String),
}

/// `http://host:port/path` with `{node}` and `{job}` filled in. Node names are checked to
/// be plain host names (they go into a URL): stricter than `options::is_plain_name`, which
/// allows `@` — in a URL's authority that would make what precedes it userinfo and change
/// the host asked.
pub fn url_for(template: &str, node: &str, job_id: u32) -> Result<String, String> {
    if node.is_empty()
        || !node
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!("{node:?} is not a node name"));
    }
    Ok(template
        .replace("{node}", node)
        .replace("{job}", &job_id.to_string()))
}

/// `url` asking for run `run` with a reply signed with `nonce` (as a query, or after one).
pub fn with_query(url: &str, run: Incarnation, nonce: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!(
        "{url}{sep}nonce={nonce}&uid={}&start={}",
        run.uid, run.start_unix
    )
}

/// What a node's server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub code: u16,
    /// The munge credential header ([`munge::HEADER`]), when there was one.
    pub credential: Option<String>,
    /// The body's bytes as received: the credential signs their hash.
    pub body: Vec<u8>,
}

/// One bounded `GET`, with `headers` (names and values the caller checked).
pub fn get(url: &str, headers: &[(&str, &str)], timeout: Duration) -> Result<Response, GetError> {
    get_inner(url, headers, timeout).map_err(|(why, dropped)| GetError { why, dropped })
}

/// Why a [`get`] gave no reply.
#[derive(Debug, Clone, PartialEq)]
pub struct GetError {
    /// One sentence, naming the host.
    pub why: String,
    /// The endpoint was there and dropped the exchange (reset, aborted, broken pipe): a
    /// server restarting, or closing at its caps. Asked again, as a busy node.
    pub dropped: bool,
}

impl std::fmt::Display for GetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// Whether an I/O error is the peer dropping an established exchange.
fn dropped(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    matches!(e.kind(), ConnectionReset | ConnectionAborted | BrokenPipe)
}

fn get_inner(
    url: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<Response, (String, bool)> {
    let start = Instant::now();
    let plain = |why: String| (why, false);
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| plain(format!("{url}: only http:// URLs are supported")))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = authority
        .to_socket_addrs()
        .map_err(|e| plain(format!("{authority}: {e}")))?
        .next()
        .ok_or_else(|| plain(format!("{authority}: no address")))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| plain(format!("{authority}: {e}")))?;
    let io = |e: std::io::Error| (format!("{authority}: {e}"), dropped(&e));
    let left = |start: Instant| {
        timeout
            .saturating_sub(start.elapsed())
            .max(Duration::from_millis(1))
    };
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    s.set_write_timeout(Some(left(start)))
        .and_then(|_| {
            write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: {authority}\r\n{extra}Connection: close\r\n\r\n"
            )
        })
        .map_err(io)?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if start.elapsed() >= timeout {
            return Err(plain(format!(
                "{authority}: no answer within {:.1} s",
                timeout.as_secs_f64()
            )));
        }
        s.set_read_timeout(Some(left(start))).map_err(io)?;
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(plain(format!(
                    "{authority}: no answer within {:.1} s",
                    timeout.as_secs_f64()
                )))
            }
            Err(e) => return Err(io(e)),
        }
        if raw.len() as u64 > MAX_REPLY_BYTES {
            return Err(plain(format!(
                "{authority}: reply larger than {MAX_REPLY_BYTES} bytes"
            )));
        }
    }
    let not_http = || plain(format!("{authority}: not an HTTP reply"));
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(not_http)?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let code = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(not_http)?;
    let credential = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(munge::HEADER))
        .map(|(_, v)| v.trim().to_string());
    Ok(Response {
        code,
        credential,
        body: raw[split + 4..].to_vec(),
    })
}

/// How requests are signed (`munge`, as this process's user: SlurmUser) and replies
/// authenticated (`unmunge` on the reply's credential).
#[derive(Debug, Clone)]
pub struct Verifier {
    pub munge: String,
    pub unmunge: String,
    pub timeout: Duration,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier {
            munge: "munge".into(),
            unmunge: "unmunge".into(),
            timeout: munge::TIMEOUT,
        }
    }
}

/// The summary in a 200 reply from `node`, accepted only when it is for `job_id`, records
/// one of the job's `nodes`, is of run `run` (a node's stale file of an earlier job with the
/// id is not), and carries root's valid munge credential over exactly this body and the
/// `nonce` this request sent ([`munge::summary_payload`]).
///
/// The signed node is the one the summary records, not the name asked: a URL without
/// `{node}` has one server answer for several names. A user's listener cannot sign as root,
/// and a real reply replayed (munge refuses a second decode), kept from an earlier request
/// (another nonce), or moved to another job or body no longer matches.
pub fn accept(
    r: &Response,
    node: &str,
    job_id: u32,
    run: Incarnation,
    nonce: &str,
    nodes: &[String],
    verifier: &Verifier,
) -> NodeAnswer {
    let n = match serde_json::from_slice::<NodeSummary>(&r.body) {
        Ok(n) => n,
        Err(e) => return NodeAnswer::Failed(format!("{node}: unreadable summary ({e})")),
    };
    if n.meta.job_id != u64::from(job_id) {
        return NodeAnswer::Failed(format!(
            "{node}: answered for job {}, not {job_id}",
            n.meta.job_id
        ));
    }
    if !nodes.contains(&n.meta.node) {
        return NodeAnswer::Refused(format!(
            "the summary is of node {:?}, not one of the job's",
            n.meta.node
        ));
    }
    if let Some(why) = run.mismatch(&n.meta) {
        return NodeAnswer::Refused(why);
    }
    let want = munge::summary_payload(job_id, &n.meta.node, nonce, &r.body);
    match munge::check(
        &verifier.unmunge,
        r.credential.as_deref(),
        &want,
        munge::ROOT_ONLY,
        verifier.timeout,
    ) {
        Ok(()) => NodeAnswer::Recorded(Box::new(n)),
        Err(why) => NodeAnswer::Refused(why.to_string()),
    }
}

/// What the controller asks of every node: which job and run, and how to sign and check.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The node's URL template ([`url_for`]).
    pub template: &'a str,
    pub job_id: u32,
    pub run: Incarnation,
    /// The job's nodes.
    pub nodes: &'a [String],
    pub verifier: &'a Verifier,
}

/// Asks `node`, one of the job's nodes, for the job's summary, once.
pub fn ask(q: &Query, node: &str, timeout: Duration) -> NodeAnswer {
    let nonce = match munge::new_nonce() {
        Ok(n) => n,
        Err(e) => return NodeAnswer::Failed(format!("{node}: {e}")),
    };
    let url = match url_for(q.template, node, q.job_id) {
        Ok(u) => with_query(&u, q.run, &nonce),
        Err(e) => return NodeAnswer::Failed(e),
    };
    let payload = munge::request_payload(q.job_id, q.run.uid, q.run.start_unix, &nonce);
    let credential = match munge::sign(&q.verifier.munge, &payload, q.verifier.timeout) {
        Ok(c) => c,
        Err(e) => return NodeAnswer::Failed(format!("{node}: {e}")),
    };
    let first_line = |r: &Response| {
        String::from_utf8_lossy(&r.body)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    };
    match get(&url, &[(munge::HEADER, &credential)], timeout) {
        Ok(r) if r.code == 200 => accept(&r, node, q.job_id, q.run, &nonce, q.nodes, q.verifier),
        Ok(r) if r.code == 404 => NodeAnswer::NotRecorded,
        // Busy (past its connection caps) or its file unreadable for now: ask again.
        Ok(r) if r.code == 503 => NodeAnswer::Busy(format!("{node}: HTTP 503: {}", first_line(&r))),
        // It refused this request (not the controller's credential, an older protocol).
        Ok(r) => NodeAnswer::Refused(format!(
            "the node answered HTTP {}: {}",
            r.code,
            first_line(&r)
        )),
        // Dropped mid-exchange (the endpoint restarting, or closing at its caps): as busy.
        Err(e) if e.dropped => NodeAnswer::Busy(e.why),
        Err(e) => NodeAnswer::Failed(e.why),
    }
}

/// Every node asked at once, each asked again after [`RETRY_PAUSE`] while it is busy and
/// `until` allows; answers in the nodes' order.
pub fn collect(q: &Query, until: Instant) -> Vec<(String, NodeAnswer)> {
    let one = |node: &str| loop {
        let left = until.saturating_duration_since(Instant::now());
        let a = ask(
            q,
            node,
            left.clamp(Duration::from_millis(100), NODE_TIMEOUT),
        );
        match a {
            NodeAnswer::Busy(_)
                if until.saturating_duration_since(Instant::now()) > RETRY_PAUSE =>
            {
                std::thread::sleep(RETRY_PAUSE)
            }
            a => return a,
        }
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = q
            .nodes
            .iter()
            .map(|n| scope.spawn(move || one(n)))
            .collect();
        q.nodes
            .iter()
            .cloned()
            .zip(handles.into_iter().map(|h| {
                h.join()
                    .unwrap_or_else(|_| NodeAnswer::Failed("internal error".into()))
            }))
            .collect()
    })
}

/// The job as `sacctmgr … where jobid=` and `sacct -j` must name it: an array task by
/// `<array id>_<task>` (its own id would also match the whole array in sacctmgr).
pub fn job_ref(job_id: u32, array_job_id: Option<&str>, array_task_id: Option<&str>) -> String {
    use crate::slurm::job_id::JobId;
    match (array_job_id, array_task_id) {
        (Some(a), Some(t)) => match JobId::parse(&format!("{a}_{t}")) {
            Ok(task @ JobId::ArrayTask { array, .. }) if array == job_id => task.to_string(),
            _ => job_id.to_string(),
        },
        _ => job_id.to_string(),
    }
}

/// What [`store`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    Written,
    /// Another tool's AdminComment was there: left as it was.
    LeftOthers(String),
}

/// The Slurm programs [`store`] runs: the real ones unless a test names others.
#[derive(Debug, Clone, Copy)]
pub struct Programs<'a> {
    pub squeue: &'a str,
    pub sacct: &'a str,
    pub sacctmgr: &'a str,
    /// `slurmwatch-dbd-comment` and the cluster's name: the store through slurmdbd's API,
    /// which keeps the value's case. Without them, sacctmgr (22.05 lowercases the value,
    /// which breaks base64).
    pub dbd_comment: Option<(&'a str, &'a str)>,
}

impl Default for Programs<'_> {
    fn default() -> Self {
        Programs {
            squeue: "squeue",
            sacct: "sacct",
            sacctmgr: "sacctmgr",
            dbd_comment: None,
        }
    }
}

/// The first release whose `sacctmgr … set AdminComment=` stores the value as given: 24.11.5
/// and 26.05.5 keep its case (the VM tier checks each), 22.05.8 lowercases it, and 23.02 and
/// 23.11 are unchecked, so they are treated as lowercasing.
pub const SACCTMGR_KEEPS_CASE_SINCE: Release = Release {
    major: 24,
    minor: 11,
};

/// Whether `sacctmgr` (the program, asked its release) stores an AdminComment's case as
/// given; `Err` when it does not say, which the caller takes as "no".
pub fn sacctmgr_keeps_case(sacctmgr: &str, timeout: Duration) -> Result<(Release, bool), String> {
    let r = release::of_program(sacctmgr, timeout)?;
    Ok((r, r >= SACCTMGR_KEEPS_CASE_SINCE))
}

/// One write of `comment`; `Err` says why not (slurmdbd may not have the job's record yet:
/// the caller tries again).
fn write_once(job: &str, comment: &str, programs: Programs, step: Duration) -> Result<(), String> {
    if let Some((helper, cluster)) = programs.dbd_comment {
        return match command::run_with_input(
            helper,
            &["--cluster", cluster, job],
            comment.as_bytes(),
            step,
        ) {
            Ok(f) if f.success => Ok(()),
            Ok(f) => Err(format!("{helper}: {}", f.reason())),
            Err(e) => Err(e.to_string()),
        };
    }
    let set = format!("AdminComment={comment}");
    let where_ = format!("jobid={job}");
    match command::run_dbd_client(
        programs.sacctmgr,
        &["-i", "modify", "job", "where", &where_, "set", &set],
        step,
    ) {
        // sacctmgr says "Nothing modified" (exit 0 or 1 by release) until slurmdbd has
        // the job: try again shortly.
        Ok(f) if f.success && !f.stdout.contains("Nothing") && !f.stderr.contains("Nothing") => {
            Ok(())
        }
        Ok(f) => Err(format!("sacctmgr: {} {}", f.stdout.trim(), f.reason())
            .trim()
            .to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Enough of an AdminComment to tell ours (`JS1:` with our gzip mark, 32 characters; `SW1:`)
/// from another tool's.
const COMMENT_PREFIX_CHARS: usize = 64;

/// What one side (slurmctld or slurmdbd) holds as the job's AdminComment.
enum Held {
    /// Nothing, or ours: ours may be written.
    Free,
    /// Another tool's text.
    Others(String),
    /// That side does not hold the job (slurmctld forgot it, past `MinJobAge`).
    NoJob,
    /// No answer: try again.
    Unchecked(String),
}

fn held(text: &str) -> Held {
    let existing = text.lines().next().unwrap_or("").trim();
    if existing.is_empty() || existing == "(null)" || record::is_ours(existing) {
        Held::Free
    } else {
        Held::Others(existing.to_string())
    }
}

/// slurmctld's AdminComment of the job (`squeue -O admin_comment`, one field alone on the
/// line). While slurmctld holds the job it is the authority: an `scontrol update` reaches
/// slurmdbd later, through slurmctld's queue to it, so slurmdbd alone may not show it yet.
fn held_by_controller(squeue: &str, job: &str, timeout: Duration) -> Held {
    let width = format!("admin_comment:{COMMENT_PREFIX_CHARS}");
    match command::run(
        squeue,
        &["-h", "-t", "all", "-j", job, "-O", &width],
        timeout,
    ) {
        Ok(f) if f.success && f.stdout.trim().is_empty() => Held::NoJob,
        Ok(f) if f.success => held(&f.stdout),
        Ok(f) if f.stderr.contains("Invalid job id") => Held::NoJob,
        Ok(f) => Held::Unchecked(format!("squeue: {}", f.reason())),
        Err(e) => Held::Unchecked(e.to_string()),
    }
}

/// slurmdbd's AdminComment of the job (`sacct`).
fn held_by_database(sacct: &str, job: &str, timeout: Duration) -> Held {
    match command::run_dbd_client(
        sacct,
        &["-j", job, "-X", "-n", "-P", "-o", "AdminComment"],
        timeout,
    ) {
        Ok(f) if f.success => held(&f.stdout),
        Ok(f) => Held::Unchecked(format!("sacct: {}", f.reason())),
        Err(e) => Held::Unchecked(e.to_string()),
    }
}

/// Stores `comment` as the job's AdminComment, retrying until slurmdbd has the job's record
/// or `deadline` passes. Another tool's AdminComment, in slurmctld or in slurmdbd, stays.
pub fn store(
    job: &str,
    comment: &str,
    programs: Programs,
    deadline: Instant,
) -> Result<Stored, String> {
    let mut last = String::from("no attempt");
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("gave up storing the summary of job {job}: {last}"));
        }
        let step = left.min(command::DEFAULT_TIMEOUT);
        // Unchecked is unwritten: both sides are asked again.
        let mut checked = true;
        for side in [
            held_by_controller(programs.squeue, job, step),
            held_by_database(programs.sacct, job, step),
        ] {
            match side {
                Held::Others(c) => return Ok(Stored::LeftOthers(c)),
                Held::Unchecked(why) => {
                    last = why;
                    checked = false;
                }
                Held::Free | Held::NoJob => {}
            }
        }
        if !checked {
            pause(deadline);
            continue;
        }
        match write_once(job, comment, programs, step) {
            Ok(()) => return Ok(Stored::Written),
            Err(e) => last = e,
        }
        pause(deadline);
    }
}

/// The job's run time as Slurm counts it (`RunTime`, end − start, sacct's `Elapsed`) while
/// slurmctld still holds the finished job; `None` when it cannot say.
pub fn elapsed(scontrol: &str, job: &str, timeout: Duration) -> Option<u64> {
    let f = command::run(scontrol, &["-o", "show", "job", job], timeout).ok()?;
    if !f.success {
        return None;
    }
    // One line of `Key=Value` words; RunTime's value has no spaces.
    let run_time = f
        .stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("RunTime="))?;
    let s = crate::slurm::units::parse_duration(run_time)?;
    (s >= 0.0).then(|| s.round() as u64)
}

/// Two seconds between tries, or what is left of `deadline`.
fn pause(deadline: Instant) {
    std::thread::sleep(
        Duration::from_secs(2).min(deadline.saturating_duration_since(Instant::now())),
    );
}

/// The AdminComment for the nodes that recorded the job; `None` when none did.
/// `elapsed_seconds`: the job's run time as Slurm counts it, when known ([`elapsed`]).
/// `case_kept`: the store keeps the value's case (slurmdbd's API): jobstats' `JS1:` format;
/// otherwise (sacctmgr) the older `SW1:`, which survives lowercasing.
pub fn comment_for(
    job_id: u32,
    answers: &[(String, NodeAnswer)],
    elapsed_seconds: Option<u64>,
    case_kept: bool,
) -> Option<Result<String, String>> {
    let mut nodes: Vec<NodeSummary> = Vec::new();
    let mut unanswered_nodes: Vec<String> = Vec::new();
    for (name, a) in answers {
        match a {
            // One per recorded node: a URL without {node} (one server for several node
            // names) answers every name with the same file.
            NodeAnswer::Recorded(n) => {
                if !nodes.iter().any(|m| m.meta.node == n.meta.node) {
                    nodes.push((**n).clone());
                }
            }
            NodeAnswer::NotRecorded => {}
            NodeAnswer::Busy(_) | NodeAnswer::Failed(_) | NodeAnswer::Refused(_) => {
                if !unanswered_nodes.contains(name) {
                    unanswered_nodes.push(name.clone());
                }
            }
        }
    }
    (!nodes.is_empty()).then(|| {
        let summary = JobSummaryRecord {
            job_id: job_id.to_string(),
            nodes,
            elapsed_seconds,
            unanswered_nodes,
        };
        if case_kept {
            record::encode(&summary)
        } else {
            record::encode_legacy(&summary)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// squeue pads the field to its width and prints `(null)` for none (Slurm 22.05.8);
    /// sacct prints nothing for none.
    #[test]
    fn an_admin_comment_is_free_only_when_empty_or_ours() {
        for free in [
            "",
            "\n",
            "(null)                                   \n",
            "SW1:abcd\n",
            "sw1:ABCD",
        ] {
            assert!(matches!(held(free), Held::Free), "{free:?}");
        }
        // Ours in jobstats' format, cut to squeue's width.
        let ours = crate::analysis::admin_comment::encode(
            &crate::analysis::admin_comment::JobSummaryRecord {
                job_id: "42".into(),
                nodes: vec![crate::analysis::admin_comment::tests::node("n1")],
                elapsed_seconds: None,
                unanswered_nodes: Vec::new(),
            },
        )
        .unwrap();
        assert!(matches!(held(&ours[..COMMENT_PREFIX_CHARS]), Held::Free));
        match held("JS1:H4sIAOtherToolsText                    \n") {
            Held::Others(c) => assert_eq!(c, "JS1:H4sIAOtherToolsText"),
            _ => panic!("another tool's comment taken as free"),
        }
        assert!(matches!(
            held("checked by admin: bad node\n"),
            Held::Others(_)
        ));
    }

    #[test]
    fn urls_are_filled_and_node_names_checked() {
        assert_eq!(
            url_for(DEFAULT_URL, "gpu-01", 42).unwrap(),
            "http://gpu-01:9944/jobs/42/summary"
        );
        for bad in ["", "a/b", "x y", "n1?x", "n@1"] {
            assert!(url_for(DEFAULT_URL, bad, 1).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_array_task_is_named_by_array_and_task() {
        assert_eq!(job_ref(7, Some("7"), Some("3")), "7_3");
        assert_eq!(job_ref(7, Some("5"), Some("3")), "7");
        assert_eq!(job_ref(7, None, None), "7");
        assert_eq!(job_ref(7, Some("7"), Some("3;x")), "7");
        assert_eq!(job_ref(7, Some("7"), Some("03")), "7");
        assert_eq!(job_ref(7, Some("07"), Some("3")), "7");
        assert_eq!(job_ref(7, Some("7"), Some("4294967296")), "7");
    }

    /// The fixture node's run (`analysis::admin_comment::tests::node`).
    const RUN: Incarnation = Incarnation {
        uid: 1000,
        start_unix: 1_700_000_000,
    };

    /// A `munge` stand-in that prints a well-formed credential (the real one signs on the
    /// test cluster).
    fn signing(dir: &std::path::Path) -> Verifier {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("munge");
        std::fs::write(&path, "#!/bin/sh\ncat >/dev/null\necho 'MUNGE:AwQF+/=:'\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Verifier {
            munge: path.to_string_lossy().into_owned(),
            ..Verifier::default()
        }
    }

    #[test]
    fn a_silent_or_absent_node_is_a_failure_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let verifier = signing(dir.path());
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let template = format!("http://{addr}/jobs/{{job}}/summary");
        let nodes = ["n1".to_string()];
        let q = Query {
            template: &template,
            job_id: 1,
            run: RUN,
            nodes: &nodes,
            verifier: &verifier,
        };
        // Accepts (the kernel's backlog) and never answers.
        let t = Instant::now();
        let a = ask(&q, "n1", Duration::from_millis(300));
        assert!(
            matches!(&a, NodeAnswer::Failed(w) if w.contains("no answer")),
            "{a:?}"
        );
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        drop(l);
        let a = ask(&q, "n1", Duration::from_millis(300));
        assert!(matches!(a, NodeAnswer::Failed(_)), "{a:?}");
    }

    /// Attack 3 of issue 37, its end: a node whose endpoint is busy when the job ends (503:
    /// flooded past its caps) is asked again within the bound, and the answer it gives once
    /// free is the one used; one that refuses, or has no endpoint, is not asked again (the job
    /// and its nodes stay COMPLETING while this runs).
    #[test]
    fn a_busy_node_is_asked_again_within_the_bound_and_no_other() {
        use std::io::{Read, Write};
        let dir = tempfile::tempdir().unwrap();
        let verifier = signing(dir.path());
        let nodes = ["n1".to_string()];
        let template_at = |addr| format!("http://{addr}/jobs/{{job}}/summary");
        let query = |template| Query {
            template,
            job_id: 1,
            run: RUN,
            nodes: &nodes,
            verifier: &verifier,
        };
        // Answers each status in turn, one connection each; the requests it read.
        let serve = |statuses: Vec<&'static str>| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let server = std::thread::spawn(move || {
                statuses
                    .into_iter()
                    .map(|status| {
                        let (mut c, _) = l.accept().unwrap();
                        // The whole head first: a close with unread bytes resets the client.
                        let mut req = Vec::new();
                        let mut buf = [0u8; 4096];
                        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                            let n = c.read(&mut buf).unwrap();
                            assert!(n > 0, "the request ended early");
                            req.extend_from_slice(&buf[..n]);
                        }
                        write!(
                            c,
                            "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        )
                        .unwrap();
                        String::from_utf8_lossy(&req).into_owned()
                    })
                    .collect::<Vec<_>>()
            });
            (template_at(addr), server)
        };
        // Busy twice, then free: the third request finds it, RETRY_PAUSE after each 503.
        let (template, server) = serve(vec![
            "503 Service Unavailable",
            "503 Service Unavailable",
            "404 Not Found",
        ]);
        let t = Instant::now();
        let answers = collect(&query(&template), Instant::now() + Duration::from_secs(20));
        assert_eq!(answers, vec![("n1".to_string(), NodeAnswer::NotRecorded)]);
        assert!(t.elapsed() >= 2 * RETRY_PAUSE, "{:?}", t.elapsed());
        assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
        let reqs = server.join().unwrap();
        assert_eq!(reqs.len(), 3);
        // Each request names the run and carries the controller's credential.
        for req in &reqs {
            assert!(
                req.starts_with("GET /jobs/1/summary?nonce=")
                    && req.contains("&uid=1000&start=1700000000 HTTP/1.1\r\n"),
                "{req}"
            );
            assert!(
                req.contains("\r\nX-Slurmwatch-Munge: MUNGE:AwQF+/=:\r\n"),
                "{req}"
            );
        }
        // Dropped mid-exchange (closed with the request unread: the kernel resets it), then
        // free: asked again, as a busy node.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (c, _) = l.accept().unwrap();
            std::thread::sleep(Duration::from_millis(100));
            drop(c);
            let (mut c, _) = l.accept().unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut chunk).unwrap();
                buf.extend_from_slice(&chunk[..n]);
            }
            write!(
                c,
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
        });
        let template = template_at(addr);
        let answers = collect(&query(&template), Instant::now() + Duration::from_secs(20));
        assert_eq!(answers, vec![("n1".to_string(), NodeAnswer::NotRecorded)]);
        server.join().unwrap();
        // A refusal is final.
        let (template, server) = serve(vec!["403 Forbidden"]);
        let t = Instant::now();
        let answers = collect(&query(&template), Instant::now() + Duration::from_secs(20));
        assert!(
            matches!(&answers[0].1, NodeAnswer::Refused(w) if w.contains("HTTP 403")),
            "{answers:?}"
        );
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        server.join().unwrap();
        // No endpoint (the connection refused): final at once, not asked for the bound.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let template = template_at(closed);
        let t = Instant::now();
        let answers = collect(&query(&template), Instant::now() + Duration::from_secs(20));
        assert!(matches!(answers[0].1, NodeAnswer::Failed(_)), "{answers:?}");
        assert!(t.elapsed() < RETRY_PAUSE, "{:?}", t.elapsed());
        // Busy for ever: given up at the bound.
        let (template, _server) = serve(vec!["503 Service Unavailable"; 10]);
        let t = Instant::now();
        let answers = collect(&query(&template), Instant::now() + Duration::from_secs(3));
        assert!(matches!(answers[0].1, NodeAnswer::Busy(_)), "{answers:?}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    /// An `unmunge` stand-in that prints what the real one prints for a valid root
    /// credential over `payload` (the real one is exercised on the test cluster).
    fn unmunge_saying(dir: &std::path::Path, uid: &str, payload: &str) -> Verifier {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(format!("unmunge-{uid}"));
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\ncat >/dev/null\nprintf 'STATUS:          Success (0)\\nUID:             {uid}\\n\\n%s' '{payload}'\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Verifier {
            unmunge: path.to_string_lossy().into_owned(),
            ..Verifier::default()
        }
    }

    #[test]
    fn a_summary_is_accepted_only_with_roots_credential_over_it() {
        let dir = tempfile::tempdir().unwrap();
        let body = serde_json::to_vec(&crate::analysis::admin_comment::tests::node("n1")).unwrap();
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let reply = |credential: Option<&str>, body: &[u8]| Response {
            code: 200,
            credential: credential.map(String::from),
            body: body.to_vec(),
        };
        let cred = Some("MUNGE:AwQF+/=:");
        let nonce = "00112233445566778899aabbccddeeff";
        let right = munge::summary_payload(42, "n1", nonce, &body);
        let root = unmunge_saying(dir.path(), "root (0)", &right);
        assert!(matches!(
            accept(&reply(cred, &body), "n1", 42, RUN, nonce, &nodes, &root),
            NodeAnswer::Recorded(_)
        ));
        let why = |a: NodeAnswer| match a {
            NodeAnswer::Refused(w) => w,
            other => panic!("{other:?}"),
        };
        // No credential: refused before unmunge is asked.
        let w = why(accept(
            &reply(None, &body),
            "n1",
            42,
            RUN,
            nonce,
            &nodes,
            &root,
        ));
        assert!(
            w.starts_with("the reply carries no munge credential"),
            "{w}"
        );
        // The body changed after signing (same length, one byte).
        let other = String::from_utf8(body.clone())
            .unwrap()
            .replace("\"alice\"", "\"alicf\"")
            .into_bytes();
        assert_ne!(other, body);
        let w = why(accept(
            &reply(cred, &other),
            "n1",
            42,
            RUN,
            nonce,
            &nodes,
            &root,
        ));
        assert!(w.contains("signs") && w.contains("not this reply"), "{w}");
        // A real reply kept from an earlier request: signed for another nonce.
        let w = why(accept(
            &reply(cred, &body),
            "n1",
            42,
            RUN,
            "ffeeddccbbaa99887766554433221100",
            &nodes,
            &root,
        ));
        assert!(w.contains("signs") && w.contains("not this reply"), "{w}");
        // A user's own credential.
        let user = unmunge_saying(dir.path(), "swuser1 (1001)", &right);
        let w = why(accept(
            &reply(cred, &body),
            "n1",
            42,
            RUN,
            nonce,
            &nodes,
            &user,
        ));
        assert!(w.contains("uid 1001, not root"), "{w}");
        // A summary of a node that is not the job's.
        let w = why(accept(
            &reply(cred, &body),
            "n1",
            42,
            RUN,
            nonce,
            &nodes[1..],
            &root,
        ));
        assert!(w.contains("not one of the job's"), "{w}");
        // The summary of an earlier job with this id (another user's, or an earlier run).
        for other_run in [
            Incarnation { uid: 1001, ..RUN },
            Incarnation {
                start_unix: RUN.start_unix + 600,
                ..RUN
            },
        ] {
            let w = why(accept(
                &reply(cred, &body),
                "n1",
                42,
                other_run,
                nonce,
                &nodes,
                &root,
            ));
            assert!(w.contains("an earlier job with this id"), "{w}");
        }
        // Another job's summary is not a refusal of this one's signature but no answer.
        assert!(matches!(
            accept(&reply(cred, &body), "n1", 43, RUN, nonce, &nodes, &root),
            NodeAnswer::Failed(_)
        ));
    }

    #[test]
    fn the_nonce_and_run_join_the_url_as_a_query() {
        let n = "00112233445566778899aabbccddeeff";
        assert_eq!(
            with_query("http://n1:9944/jobs/7/summary", RUN, n),
            format!("http://n1:9944/jobs/7/summary?nonce={n}&uid=1000&start=1700000000")
        );
        assert_eq!(
            with_query("http://n1:9944/jobs/7/summary?x=1", RUN, n),
            format!("http://n1:9944/jobs/7/summary?x=1&nonce={n}&uid=1000&start=1700000000")
        );
    }

    #[test]
    fn no_recorded_node_means_no_comment() {
        let answers = vec![
            ("n1".to_string(), NodeAnswer::NotRecorded),
            ("n2".to_string(), NodeAnswer::Failed("down".into())),
        ];
        assert_eq!(comment_for(1, &answers, None, true), None);
    }

    /// One node recorded, one down, one busy past the bound, one refused, one without the
    /// job: the comment holds the recorded node and names the three without figures, once
    /// each (a URL without `{node}` can name a node twice).
    #[test]
    fn a_partial_comment_names_the_nodes_without_figures() {
        let n1 = crate::analysis::admin_comment::tests::node("n1");
        let answers = vec![
            ("n1".to_string(), NodeAnswer::Recorded(Box::new(n1.clone()))),
            ("n2".to_string(), NodeAnswer::Failed("refused".into())),
            ("n3".to_string(), NodeAnswer::Busy("503".into())),
            ("n4".to_string(), NodeAnswer::Refused("not root's".into())),
            ("n5".to_string(), NodeAnswer::NotRecorded),
            ("n2".to_string(), NodeAnswer::Failed("refused".into())),
        ];
        let c = comment_for(7, &answers, Some(60), true).unwrap().unwrap();
        let summary = crate::analysis::admin_comment::decode(&c).unwrap();
        assert_eq!(summary.nodes, vec![n1]);
        assert_eq!(summary.unanswered_nodes, ["n2", "n3", "n4"]);
        // A whole one writes no such key (older readers see what they saw).
        let whole = comment_for(7, &answers[..1], Some(60), true)
            .unwrap()
            .unwrap();
        let whole = crate::analysis::admin_comment::decode(&whole).unwrap();
        let json = serde_json::to_string(&whole).unwrap();
        assert!(!json.contains("unanswered_nodes"), "{json}");
    }
}
