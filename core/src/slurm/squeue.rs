//! `squeue`: the user's jobs and one job's state, time budget and allocation.
//!
//! A job name is whatever its owner typed, and Slurm keeps a newline or a unit separator in it
//! (DESIGN §10). So the answer is cut as sacct's is (`sacct::records`): each call asks a
//! delimiter drawn at random for it, and the free-text name lies between fixed-format
//! columns (the display id first, the node count last), so a record is exactly the header's
//! count of fields and a newline stays inside the name. No name can forge or hide a job.

use std::time::Duration;

use super::command::{self, CommandError, Finished};
use super::hostlist;
use super::job_id::JobId;
use super::sacct::records::{Cut, Delimiter, Records};
use super::units::{parse_memory_mib, parse_whole_seconds};

/// The `squeue -o` columns in order: display id, job id, state, user, uid, elapsed, limit,
/// start, end, node list, reason, CPUs, memory per node, name, node count.
pub const COLUMNS: [&str; FIELDS] = [
    "%i", "%A", "%T", "%u", "%U", "%M", "%l", "%S", "%e", "%N", "%r", "%C", "%m", "%j", "%D",
];
const FIELDS: usize = 15;

/// The `-o` format joining [`COLUMNS`] with `delimiter`.
pub fn format(delimiter: &str) -> String {
    COLUMNS.join(delimiter)
}

/// One line of `squeue` for a job (or an array task).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// As Slurm prints it: `12345`, `12345_3`, `12345_[1-9]`, `123+1`.
    pub display_id: String,
    /// The job's own id (`%A`, read by `job_id::JobId::own`): the name of its file and cgroup.
    pub job_id: u32,
    /// `RUNNING`, `PENDING`, `COMPLETING`, ...
    pub state: String,
    pub user: String,
    pub uid: Option<u32>,
    pub elapsed_seconds: Option<u64>,
    pub limit: TimeLimit,
    /// Slurm's timestamps as printed (`SLURM_TIME_FORMAT=standard`, local time), or `None`
    /// for `N/A`/`NONE`/`Unknown`.
    pub start: Option<String>,
    pub end: Option<String>,
    pub nodes: String,
    pub reason: String,
    pub cpus: Option<u32>,
    /// Memory requested per node (`%m`), bytes; `None` when 0 or unparseable.
    pub memory_per_node_bytes: Option<u64>,
    pub node_count: Option<u32>,
    pub name: String,
}

impl QueueEntry {
    pub fn is_running(&self) -> bool {
        matches!(self.state.as_str(), "RUNNING" | "COMPLETING")
    }

    pub fn is_pending(&self) -> bool {
        matches!(self.state.as_str(), "PENDING" | "CONFIGURING" | "REQUEUED")
    }

    /// The first node of the allocation (the batch host for a batch job), when it is a
    /// plain name; a bracketed list is expanded only for its first element.
    pub fn first_node(&self) -> Option<String> {
        first_host(&self.nodes)
    }
}

/// A job's time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeLimit {
    Seconds(u64),
    Unlimited,
    #[default]
    Unknown,
}

/// Parses `squeue -o format(delimiter)` output (its header first); records that do not have
/// every field, or whose ids are not numbers, are skipped.
pub fn parse(text: &str, delimiter: &str) -> Vec<QueueEntry> {
    let mut records = Records::new(delimiter);
    let mut out = Vec::new();
    let mut on_cut = |cut: Cut<'_>| {
        if let Cut::Record(text, spans) = cut {
            let f: Vec<&str> = spans.iter().map(|&(a, b)| &text[a..b]).collect();
            out.extend(entry(&f));
        }
    };
    records.push(text.as_bytes(), &mut on_cut);
    records.finish(&mut on_cut);
    out
}

fn entry(f: &[&str]) -> Option<QueueEntry> {
    if f.len() != FIELDS {
        return None;
    }
    let time = |s: &str| {
        let s = s.trim();
        (!s.is_empty() && !matches!(s, "N/A" | "NONE" | "Unknown" | "(null)"))
            .then(|| s.to_string())
    };
    Some(QueueEntry {
        display_id: f[0].trim().to_string(),
        job_id: JobId::own(f[1].trim())?,
        state: f[2].trim().to_string(),
        user: f[3].trim().to_string(),
        uid: f[4].trim().parse().ok(),
        elapsed_seconds: parse_whole_seconds(f[5]),
        limit: match f[6].trim() {
            "UNLIMITED" | "INFINITE" => TimeLimit::Unlimited,
            s => parse_whole_seconds(s).map_or(TimeLimit::Unknown, TimeLimit::Seconds),
        },
        start: time(f[7]),
        end: time(f[8]),
        nodes: f[9].trim().to_string(),
        reason: f[10].trim().to_string(),
        cpus: f[11].trim().parse().ok(),
        memory_per_node_bytes: parse_memory_mib(f[12]),
        name: f[13].to_string(),
        node_count: f[14].trim().parse().ok(),
    })
}

/// The first host of a Slurm host list (`node[01-04]` → `node01`); `None` for a reason in
/// parentheses or anything else that is not a host list.
fn first_host(list: &str) -> Option<String> {
    let list = list.trim();
    if list.starts_with('(') {
        return None; // a pending job's reason, `(Resources)`
    }
    hostlist::expand(list).ok()?.into_iter().next()
}

/// Why `squeue` could not answer about a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error(transparent)]
    Command(#[from] CommandError),
    /// Slurm does not know the id (never existed, or ended longer ago than `MinJobAge`).
    #[error("Slurm does not know job {0}")]
    UnknownJob(String),
    #[error("squeue failed: {0}")]
    Failed(String),
}

/// squeue's answer and the delimiter it was asked with.
fn squeue(args: &[&str], timeout: Duration) -> Result<(Finished, Delimiter), CommandError> {
    let delimiter = Delimiter::fresh();
    let format = format(delimiter.as_str());
    let mut a = vec!["-o", format.as_str()];
    a.extend_from_slice(args);
    Ok((command::run("squeue", &a, timeout)?, delimiter))
}

/// The lines for one job id as the user wrote it (`12345`, `12345_3`, `123+1`); an array
/// given by its base id yields one line per task (`-r`).
pub fn query_job(id: &str) -> Result<Vec<QueueEntry>, QueryError> {
    let (f, delimiter) = squeue(&["-r", "-j", id], command::DEFAULT_TIMEOUT)?;
    if !f.success {
        let reason = f.reason();
        if reason.contains("Invalid job id") {
            return Err(QueryError::UnknownJob(id.to_string()));
        }
        return Err(QueryError::Failed(reason));
    }
    let entries = parse(&f.stdout, delimiter.as_str());
    if entries.is_empty() {
        return Err(QueryError::UnknownJob(id.to_string()));
    }
    Ok(entries)
}

/// The user's jobs that are running or pending (array tasks one per line).
pub fn query_user(user: &str) -> Result<Vec<QueueEntry>, QueryError> {
    let (f, delimiter) = squeue(
        &[
            "-r",
            "-u",
            user,
            "-t",
            "RUNNING,PENDING,COMPLETING,CONFIGURING,SUSPENDED",
        ],
        command::DEFAULT_TIMEOUT,
    )?;
    if !f.success {
        return Err(QueryError::Failed(f.reason()));
    }
    Ok(parse(&f.stdout, delimiter.as_str()))
}

/// `squeue --start -o` format for the pending queue: job id, display id, state, partition,
/// priority, expected start, reason, user (all fixed words: no free text).
pub const START_FORMAT: &str = "%A\x1f%i\x1f%T\x1f%P\x1f%Q\x1f%S\x1f%r\x1f%u";

/// One pending job as `squeue --start` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEntry {
    /// The job's own id (`%A`).
    pub job_id: u32,
    pub display_id: String,
    pub partitions: Vec<String>,
    pub priority: Option<u64>,
    /// The scheduler's expected start, when it has one.
    pub expected_start: Option<String>,
    pub reason: String,
    pub user: String,
}

/// Parses `squeue --start -h -o START_FORMAT`; lines missing fields are skipped.
pub fn parse_start(text: &str) -> Vec<PendingEntry> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\x1f').collect();
            if f.len() != 8 {
                return None;
            }
            let start = f[5].trim();
            Some(PendingEntry {
                job_id: JobId::own(f[0].trim())?,
                display_id: f[1].trim().to_string(),
                partitions: f[3].trim().split(',').map(str::to_string).collect(),
                priority: f[4].trim().parse().ok(),
                expected_start: (!start.is_empty()
                    && !matches!(start, "N/A" | "NONE" | "Unknown" | "(null)"))
                .then(|| start.to_string()),
                reason: f[6].trim().to_string(),
                user: f[7].trim().to_string(),
            })
        })
        .collect()
}

/// Every pending job with its priority and expected start (one Slurm command; all users,
/// so the job's place in its partition's queue can be counted).
pub fn query_start() -> Result<Vec<PendingEntry>, QueryError> {
    let f = command::run(
        "squeue",
        &["--start", "-h", "-o", START_FORMAT],
        command::DEFAULT_TIMEOUT,
    )?;
    if !f.success {
        return Err(QueryError::Failed(f.reason()));
    }
    Ok(parse_start(&f.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_whole_seconds("0:10"), Some(10));
        assert_eq!(parse_whole_seconds("10:00"), Some(600));
        assert_eq!(parse_whole_seconds("1:02:03"), Some(3723));
        assert_eq!(parse_whole_seconds("2-01:00:00"), Some(2 * 86400 + 3600));
        assert_eq!(parse_whole_seconds("2-01"), Some(2 * 86400 + 3600));
        assert_eq!(parse_whole_seconds("2-01:30"), Some(2 * 86400 + 5400));
        assert_eq!(parse_whole_seconds("UNLIMITED"), None);
        assert_eq!(parse_whole_seconds("INVALID"), None);
        assert_eq!(parse_whole_seconds(""), None);
    }

    #[test]
    fn memory() {
        assert_eq!(parse_memory_mib("1G"), Some(1 << 30));
        assert_eq!(parse_memory_mib("100M"), Some(100 << 20));
        assert_eq!(parse_memory_mib("2048"), Some(2048 << 20));
        assert_eq!(parse_memory_mib("0"), None);
        assert_eq!(parse_memory_mib("lots"), None);
    }

    #[test]
    fn hosts() {
        assert_eq!(first_host("vm").as_deref(), Some("vm"));
        assert_eq!(first_host("node[01-04,07]").as_deref(), Some("node01"));
        assert_eq!(first_host("a,b").as_deref(), Some("a"));
        assert_eq!(first_host("").as_deref(), None);
        assert_eq!(first_host("(Resources)").as_deref(), None);
    }

    /// The delimiter the fixtures below were captured with (`format(CAPTURED)`).
    const CAPTURED: &str = "\x1f5e1f0c2a9b7d3e46\x1f";

    /// Captured from the test cluster (22.05.8): `squeue -u swuser1 -o format(CAPTURED)` with
    /// a running job whose name holds a comma and a quote, one held by `--begin`, and one
    /// whose name is `x`, a newline and a whole forged record in the old one-byte format
    /// (job 4000000001 of swuser2 on n1), which the name-last, line-per-job reader took for
    /// a job of its own.
    #[test]
    fn captured_user_queue_and_a_name_forges_no_job() {
        let e = parse(
            include_str!("../../tests/fixtures/slurm/squeue_user_forging.txt"),
            CAPTURED,
        );
        let ids: Vec<u32> = e.iter().map(|e| e.job_id).collect();
        assert_eq!(ids, [784, 785, 783]);
        let run = e.iter().find(|e| e.display_id == "783").unwrap();
        assert!(run.is_running());
        assert_eq!(run.name, "cap,\"x");
        assert_eq!(run.user, "swuser1");
        assert_eq!(run.uid, Some(1001));
        assert_eq!(run.elapsed_seconds, Some(2));
        assert_eq!(run.limit, TimeLimit::Seconds(600));
        assert_eq!(run.end.as_deref(), Some("2026-12-06T23:08:19"));
        assert_eq!(run.cpus, Some(2));
        assert_eq!(run.memory_per_node_bytes, Some(1 << 30));
        assert_eq!(run.node_count, Some(1));
        assert_eq!(run.first_node().as_deref(), Some("vm"));
        let held = e.iter().find(|e| e.display_id == "784").unwrap();
        assert!(held.is_pending());
        assert_eq!(held.reason, "BeginTime");
        // The forging job is the owner's own, its name kept whole, newline and all.
        let forging = e.iter().find(|e| e.display_id == "785").unwrap();
        assert_eq!(forging.user, "swuser1");
        assert_eq!(forging.reason, "Resources");
        assert!(forging.name.starts_with("x\n4000000001\x1f") && forging.name.ends_with("forged"));
        assert_eq!(forging.node_count, Some(1));
        assert!(e.iter().all(|e| e.user == "swuser1"));

        // `-r`: a pending array listed task by task, beside the same jobs.
        let tasks = parse(
            include_str!("../../tests/fixtures/slurm/squeue_user_array_expanded.txt"),
            CAPTURED,
        );
        let ids: Vec<&str> = tasks.iter().map(|t| t.display_id.as_str()).collect();
        assert_eq!(ids, ["787", "788", "789_1", "789_2", "786"]);
    }

    /// Captured from the test cluster: `squeue --start -h -o START_FORMAT` with a held job,
    /// one over `short`'s MaxTime, one asking more memory than the node, one on a dependency.
    #[test]
    fn captured_start_list() {
        let e = parse_start(include_str!("../../tests/fixtures/slurm/squeue_start.txt"));
        assert_eq!(e.len(), 4);
        assert_eq!(e[0].job_id, 236);
        assert_eq!(e[0].priority, Some(0));
        assert_eq!(e[0].reason, "JobHeldUser");
        assert_eq!(e[0].expected_start, None);
        assert_eq!(e[1].partitions, ["short"]);
        assert_eq!(e[1].priority, Some(4294901687));
        assert_eq!(e[3].user, "swuser1");
        let s = parse_start(
            "9\x1f9\x1fPENDING\x1fa,b\x1f10\x1f2026-11-30T12:00:00\x1fResources\x1fu\nbad\n",
        );
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].partitions, ["a", "b"]);
        assert_eq!(s[0].expected_start.as_deref(), Some("2026-11-30T12:00:00"));
    }

    /// Job ids are read through `job_id`'s one parser: the captured records with their `%A`
    /// made a leading-zero, a zero or a past-`u32` id are skipped, as `--start`'s are.
    #[test]
    fn job_ids_go_through_the_one_parser() {
        let text = include_str!("../../tests/fixtures/slurm/squeue_user_array_expanded.txt");
        let with_id = |bad: &str| text.replacen("\x1f787\x1f", &format!("\x1f{bad}\x1f"), 1);
        let ids = |t: &str| -> Vec<u32> { parse(t, CAPTURED).iter().map(|e| e.job_id).collect() };
        assert_eq!(ids(text), [787, 788, 789, 789, 786]);
        for bad in ["0787", "0", "4294967296", "+787", "787_1"] {
            assert_eq!(ids(&with_id(bad)), [788, 789, 789, 786], "{bad}");
        }
        let start = include_str!("../../tests/fixtures/slurm/squeue_start.txt");
        let ids: Vec<u32> = parse_start(start).iter().map(|e| e.job_id).collect();
        assert_eq!(ids, [236, 237, 238, 239]);
        for bad in ["0236", "4294967296", "-236"] {
            let t = start.replacen("236\x1f236", &format!("{bad}\x1f236"), 1);
            assert_eq!(parse_start(&t).len(), 3, "{bad}");
        }
    }

    #[test]
    fn a_record_short_of_fields_or_without_ids_is_skipped() {
        let d = "\x1fd\x1f";
        let header = format(d).replace('%', "") + "\n";
        assert!(parse(&format!("{header}1{d}2{d}RUNNING\n"), d).is_empty());
        let no_id = [
            "x",
            "not-a-number",
            "R",
            "u",
            "1",
            "0:00",
            "1:00",
            "N/A",
            "N/A",
            "",
            "",
            "1",
            "0",
            "n",
            "1",
        ];
        assert!(parse(&format!("{header}{}\n", no_id.join(d)), d).is_empty());
        // The same record with ids is read: the skip above is the ids'.
        let ok = [
            "7", "7", "R", "u", "1", "0:00", "1:00", "N/A", "N/A", "", "", "1", "0", "n", "1",
        ];
        assert_eq!(parse(&format!("{header}{}\n", ok.join(d)), d).len(), 1);
    }
}
