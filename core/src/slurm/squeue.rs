//! `squeue`: the user's jobs and one job's state, time budget and allocation.
//!
//! Fields are separated by the ASCII unit separator (0x1f), which no job name, node list or
//! reason contains in practice, and the free-text job name comes last so even a name holding
//! one stays whole.

use std::time::Duration;

use super::command::{self, CommandError, Finished};
use super::hostlist;
use super::units::{parse_memory_mib, parse_whole_seconds};

/// `squeue -o` format: display id, job id, state, user, uid, elapsed, limit, start, end,
/// node list, reason, CPUs, memory per node, node count, name.
pub const FORMAT: &str =
    "%i\x1f%A\x1f%T\x1f%u\x1f%U\x1f%M\x1f%l\x1f%S\x1f%e\x1f%N\x1f%r\x1f%C\x1f%m\x1f%D\x1f%j";
const FIELDS: usize = 15;

/// One line of `squeue` for a job (or an array task).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// As Slurm prints it: `12345`, `12345_3`, `12345_[1-9]`, `123+1`.
    pub display_id: String,
    /// The numeric job id (`%A`): the name of the job's file and cgroup.
    pub job_id: u64,
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

/// Parses `squeue -h -o FORMAT` output; lines that do not have every field are skipped.
pub fn parse(text: &str) -> Vec<QueueEntry> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<QueueEntry> {
    let f: Vec<&str> = line.splitn(FIELDS, '\x1f').collect();
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
        job_id: f[1].trim().parse().ok()?,
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
        node_count: f[13].trim().parse().ok(),
        name: f[14].to_string(),
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

fn squeue(args: &[&str], timeout: Duration) -> Result<Finished, CommandError> {
    let mut a = vec!["-h", "-o", FORMAT];
    a.extend_from_slice(args);
    command::run("squeue", &a, timeout)
}

/// The lines for one job id as the user wrote it (`12345`, `12345_3`, `123+1`); an array
/// given by its base id yields one line per task (`-r`).
pub fn query_job(id: &str) -> Result<Vec<QueueEntry>, QueryError> {
    let f = squeue(&["-r", "-j", id], command::DEFAULT_TIMEOUT)?;
    if !f.success {
        let reason = f.reason();
        if reason.contains("Invalid job id") {
            return Err(QueryError::UnknownJob(id.to_string()));
        }
        return Err(QueryError::Failed(reason));
    }
    let entries = parse(&f.stdout);
    if entries.is_empty() {
        return Err(QueryError::UnknownJob(id.to_string()));
    }
    Ok(entries)
}

/// The user's jobs that are running or pending (array tasks one per line).
pub fn query_user(user: &str) -> Result<Vec<QueueEntry>, QueryError> {
    let f = squeue(
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
    Ok(parse(&f.stdout))
}

/// `squeue --start -o` format for the pending queue: job id, display id, state, partition,
/// priority, expected start, reason, user (all fixed words: no free text).
pub const START_FORMAT: &str = "%A\x1f%i\x1f%T\x1f%P\x1f%Q\x1f%S\x1f%r\x1f%u";

/// One pending job as `squeue --start` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEntry {
    pub job_id: u64,
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
                job_id: f[0].trim().parse().ok()?,
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

    /// Captured from the test cluster: `squeue -h -u swuser1 -o FORMAT` (a running job whose
    /// name holds a comma and a quote, a pending array, a job held by `--begin`).
    #[test]
    fn captured_user_queue() {
        let e = parse(include_str!("../../tests/fixtures/slurm/squeue_user.txt"));
        assert_eq!(e.len(), 3);
        let run = e.iter().find(|e| e.display_id == "101").unwrap();
        assert_eq!(run.job_id, 101);
        assert!(run.is_running());
        assert_eq!(run.name, "cap,\"x");
        assert_eq!(run.user, "swuser1");
        assert_eq!(run.uid, Some(1001));
        assert_eq!(run.elapsed_seconds, Some(10));
        assert_eq!(run.limit, TimeLimit::Seconds(600));
        assert_eq!(run.end.as_deref(), Some("2026-11-30T10:56:19"));
        assert_eq!(run.cpus, Some(2));
        assert_eq!(run.memory_per_node_bytes, Some(1 << 30));
        assert_eq!(run.first_node().as_deref(), Some("vm"));
        let arr = e.iter().find(|e| e.display_id == "103_[1-2]").unwrap();
        assert!(arr.is_pending());
        assert_eq!(arr.limit, TimeLimit::Unlimited);
        assert_eq!(arr.reason, "Resources");
        let held = e.iter().find(|e| e.display_id == "104").unwrap();
        assert_eq!(held.reason, "BeginTime");
        assert_eq!(held.end, None);
        assert_eq!(held.memory_per_node_bytes, None);
        let tasks = parse(include_str!(
            "../../tests/fixtures/slurm/squeue_user_array_expanded.txt"
        ));
        let ids: Vec<&str> = tasks.iter().map(|t| t.display_id.as_str()).collect();
        assert_eq!(ids, ["103_1", "103_2", "104", "101"]);
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

    #[test]
    fn a_bad_line_is_skipped() {
        assert!(parse("1\x1f2\x1fRUNNING\n").is_empty());
        assert!(parse("x\x1fnot-a-number\x1fR\x1fu\x1f1\x1f0:00\x1f1:00\x1fN/A\x1fN/A\x1f\x1f\x1f1\x1f0\x1f1\x1fn").is_empty());
    }
}
