//! `sacct`: what Slurm's accounting recorded about a job and its steps.
//!
//! The traps this module exists for (docs/design.md §4), each handled where it is parsed:
//! - the output format is pinned: `SLURM_TIME_FORMAT=standard` and `LC_ALL=C` (a user's
//!   `SLURM_TIME_FORMAT=relative` or a locale would rewrite every timestamp), and the header
//!   line is kept so columns are found by name, never by position;
//! - `--parsable2 --delimiter=$'\x1f'`: a `|` inside a job name, work dir or constraint would
//!   shift every later column of `--parsable2`'s default delimiter; `|` is only the fallback for
//!   a `sacct` that refuses `--delimiter`, and a line with the wrong field count is skipped;
//! - `ReqMem` `0n` means "all of each node's memory", never zero; `Mn`/`Mc` suffixes are per
//!   node / per CPU (before 21.08), `ReqMem` without a suffix is per node;
//! - `AllocTRES` `mem=` is the allocation total over all nodes (per node = total / nodes);
//! - `MaxRSS` and a meaningful `TotalCPU` exist only on step lines (`.batch`, `.N`); a job
//!   with no step lines (its steps purged, or none ever started) falls back to the job
//!   line's `TotalCPU`, labelled as such;
//! - `MaxRSS` is the largest *single task's* peak: a step of N tasks on a node used up to the
//!   sum of its tasks, which `TRESUsageInTot` `mem=` gives on one node (over several nodes
//!   22.05.8 printed one node's sum: see [`StepMemoryBasis`]);
//! - a `RUNNING` record with `End=Unknown` may outlive the job (a lost end record): callers
//!   check squeue or the recording before believing the elapsed time;
//! - GPUs are spelled `gres/gpu=4`, `gres/gpu:a100=4` (usually beside the untyped one) or, before
//!   20.11, `AllocGRES=gpu:4`;
//! - `Reserved` was renamed `Planned` in 23.02, and 22.05 refuses `Planned`: neither is asked
//!   (each costs a second slurmdbd round trip on one release or the other); the time from
//!   eligible to start is computed from `Eligible` and `Start`, which every release has. Any
//!   other field a release calls invalid is swapped for its other name (or dropped) and the
//!   query retried, as a fallback;
//! - one query answers the whole report: `SubmitLine` (where the job's output went) and
//!   `AdminComment` (slurmwatch's summary) ride along; both are typed by people, so a record
//!   split over several physical lines (a newline inside a field) is joined back;
//! - `sacct` missing, hanging (slurmdbd down: it can wait for minutes) or failing gets one
//!   sentence, after a bounded wait.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::units::{parse_duration, parse_size, split_ascii, split_once_ascii};

mod columns;
mod group;
mod stream;
mod times;

use columns::Columns;
pub use columns::Kept;
pub use group::Tally;
use group::{Grouper, Rejoin};
use stream::Budget;

/// The raw values a window query keeps per line ([`Kept::Ids`]); everything else a window
/// needs must be a typed member of [`Line`], read from the column when the line is typed.
pub const WINDOW_KEPT_FIELDS: &[&str] = &["JobIDRaw"];

/// The fields asked for, in this order. Each is looked up by name in the header.
pub const FIELDS: &[&str] = &[
    "JobID",
    "JobIDRaw",
    "JobName",
    "User",
    "UID",
    "Group",
    "Account",
    "Partition",
    "Cluster",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Reason",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "Elapsed",
    "ElapsedRaw",
    "Timelimit",
    "TimelimitRaw",
    "NNodes",
    "NCPUS",
    "ReqCPUS",
    "AllocCPUS",
    "ReqMem",
    "ReqTRES",
    "AllocTRES",
    "NTasks",
    "NodeList",
    "TotalCPU",
    "UserCPU",
    "SystemCPU",
    "MaxRSS",
    "TRESUsageInTot",
    "TRESUsageInMax",
    "MaxRSSNode",
    "MaxRSSTask",
    "AveRSS",
    "MaxVMSize",
    "MaxDiskRead",
    "MaxDiskWrite",
    "WorkDir",
    "SubmitLine",
    // Last: an AdminComment another tool wrote may hold anything; ours is base32
    // (report::slurmdbd).
    "AdminComment",
];

/// Fields known under two names across Slurm releases (newer, older). Neither of these is in
/// [`FIELDS`] (see the module doc); the table is the fallback for a list that names one.
const RENAMED: &[(&str, &str)] = &[("Planned", "Reserved")];

/// The unit separator: never in a job name typed at a shell, unlike `|`.
pub const DELIMITER: char = '\u{1f}';

/// How long `sacct` may take before the report gives up on it (slurmdbd down makes it hang).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// Why sacct could not answer. Each `Display` is one sentence for the user.
#[derive(Debug, thiserror::Error)]
pub enum SacctError {
    #[error("sacct is not installed here ({0}); run the report on a node with Slurm's client commands, or give --file and --no-sacct")]
    Missing(String),
    #[error("sacct did not answer within {0} s (is slurmdbd up?); try again, or use --no-sacct")]
    TimedOut(u64),
    #[error("sacct failed: {0}")]
    Failed(String),
    #[error("sacct knows no job {0} (wrong id, another cluster, or purged from accounting)")]
    UnknownJob(String),
}

/// A state, with the `by <uid>` of `CANCELLED by 0` split off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct State {
    /// `COMPLETED`, `FAILED`, `OUT_OF_MEMORY`, `TIMEOUT`, `CANCELLED`, `RUNNING`, ...
    pub name: String,
    /// Who cancelled (sacct prints only the uid).
    pub cancelled_by_uid: Option<u32>,
}

impl State {
    pub fn parse(s: &str) -> State {
        let mut it = s.split_whitespace();
        let name = it.next().unwrap_or("").to_string();
        let cancelled_by_uid = match (it.next(), it.next()) {
            (Some("by"), Some(uid)) => uid.parse().ok(),
            _ => None,
        };
        State {
            name,
            cancelled_by_uid,
        }
    }
}

/// `ExitCode` `code:signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExitCode {
    pub code: i32,
    pub signal: i32,
}

impl ExitCode {
    pub fn parse(s: &str) -> Option<ExitCode> {
        let (c, sig) = s.split_once(':')?;
        Some(ExitCode {
            code: c.trim().parse().ok()?,
            signal: sig.trim().parse().ok()?,
        })
    }
}

/// A TRES list (`cpu=2,mem=1G,node=1,gres/gpu=4,gres/gpu:a100=4,billing=2`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Tres {
    pub cpus: Option<u64>,
    /// Total over all nodes of the allocation.
    pub memory_bytes: Option<u64>,
    pub nodes: Option<u64>,
    /// GPUs over all nodes: the untyped `gres/gpu` count, else the sum of the typed ones.
    pub gpus: Option<u64>,
    /// `a100` from `gres/gpu:a100=4`.
    pub gpu_types: Vec<String>,
}

impl Tres {
    pub fn parse(s: &str) -> Tres {
        let mut t = Tres::default();
        let mut untyped = None;
        let mut typed: Option<u64> = None;
        for part in split_ascii(s, b',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let Some((k, v)) = split_once_ascii(part, b'=') else {
                continue;
            };
            match k {
                "cpu" => t.cpus = v.parse().ok(),
                "mem" => t.memory_bytes = parse_size(v, 1 << 20),
                "node" => t.nodes = v.parse().ok(),
                "gres/gpu" => untyped = v.parse().ok(),
                _ => {
                    if let Some(ty) = k.strip_prefix("gres/gpu:") {
                        if let Ok(n) = v.parse::<u64>() {
                            typed = Some(typed.unwrap_or(0) + n);
                            t.gpu_types.push(ty.to_string());
                        }
                    }
                }
            }
        }
        t.gpus = untyped.or(typed);
        t
    }
}

/// Pre-20.11 `AllocGRES`/`ReqGRES`: `gpu:4`, `gpu:tesla:2`, `gpu:2(IDX:0-1)`, comma-separated.
pub fn parse_gres_gpus(s: &str) -> Option<u64> {
    let mut total = None;
    for part in s.split(',') {
        let part = part.split('(').next().unwrap_or("");
        let mut f = part.split(':');
        if f.next() != Some("gpu") {
            continue;
        }
        let n = f
            .next_back()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(1);
        total = Some(total.unwrap_or(0) + n);
    }
    total
}

/// What `ReqMem` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "per")]
pub enum ReqMem {
    /// Per node. `bytes: 0` (`0n`, `--mem=0`) means all of each node's memory.
    Node { bytes: u64 },
    /// Per allocated CPU (`--mem-per-cpu`).
    Cpu { bytes: u64 },
}

impl ReqMem {
    pub fn parse(s: &str) -> Option<ReqMem> {
        let s = s.trim();
        if s.is_empty() {
            return None;
        }
        let (body, per_cpu) = match s.as_bytes()[s.len() - 1] {
            b'n' => (&s[..s.len() - 1], false),
            b'c' => (&s[..s.len() - 1], true),
            _ => (s, false),
        };
        let bytes = parse_size(body, 1 << 20)?;
        Some(if per_cpu {
            ReqMem::Cpu { bytes }
        } else {
            ReqMem::Node { bytes }
        })
    }

    /// True for `0n`: the whole node, not "no memory".
    pub fn is_whole_node(&self) -> bool {
        matches!(self, ReqMem::Node { bytes: 0 })
    }
}

/// `2026-11-30T10:44:58` in the local zone (the `standard` format) into Unix seconds.
/// `Unknown`, `None` and anything else are `None`.
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = s.split_once('T')?;
    let d: Vec<i32> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<i32> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if d.len() != 3 || t.len() != 3 {
        return None;
    }
    // SAFETY: tm is plain data; mktime only reads and normalises it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = d[0] - 1900;
    tm.tm_mon = d[1] - 1;
    tm.tm_mday = d[2];
    tm.tm_hour = t[0];
    tm.tm_min = t[1];
    tm.tm_sec = t[2];
    tm.tm_isdst = -1;
    let v = unsafe { libc::mktime(&mut tm) };
    (v != -1).then_some(v as i64)
}

/// One line of sacct: the job (`12345`) or a step (`12345.batch`, `12345.0`, `12345.extern`).
/// `fields` keeps every value as sacct printed it (for `--json`); the typed members are
/// parsed from it, `None` where sacct printed nothing or something unreadable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    pub job_id: String,
    /// The part after the dot for a step line.
    pub step: Option<String>,
    pub job_name: String,
    pub user: Option<String>,
    pub uid: Option<u32>,
    pub state: State,
    pub exit_code: Option<ExitCode>,
    pub submit_unix: Option<i64>,
    pub eligible_unix: Option<i64>,
    pub start_unix: Option<i64>,
    pub end_unix: Option<i64>,
    pub elapsed_seconds: Option<u64>,
    /// Minutes; `None` for UNLIMITED (and on step lines).
    pub timelimit_minutes: Option<u64>,
    /// Time between eligible and start: `Planned`/`Reserved` where sacct printed one, else
    /// `Start` − `Eligible`.
    pub planned_seconds: Option<f64>,
    pub nodes: Option<u64>,
    pub cpus: Option<u64>,
    pub req_cpus: Option<u64>,
    pub req_mem: Option<ReqMem>,
    pub req_tres: Tres,
    pub alloc_tres: Tres,
    /// From pre-20.11 `AllocGRES` where present.
    pub alloc_gres_gpus: Option<u64>,
    pub node_list: Option<String>,
    pub partition: Option<String>,
    pub total_cpu_seconds: Option<f64>,
    pub user_cpu_seconds: Option<f64>,
    pub system_cpu_seconds: Option<f64>,
    /// Step lines only: the largest task RSS sampled by jobacct_gather.
    pub max_rss_bytes: Option<u64>,
    pub ave_rss_bytes: Option<u64>,
    /// `NTasks`: the step's task count (empty on the job line).
    pub tasks: Option<u64>,
    /// `TRESUsageInTot` `mem=`: the step's tasks' memory summed over every task.
    pub tres_usage_in_tot_mem_bytes: Option<u64>,
    /// `TRESUsageInMax` `mem=`: the largest task's (the same figure as `MaxRSS`).
    pub tres_usage_in_max_mem_bytes: Option<u64>,
    pub work_dir: Option<String>,
    /// `AdminComment`: where slurmwatch's summary of the job lives (`SW1:…`), or another
    /// tool's note; empty on step lines.
    pub admin_comment: Option<String>,
    /// `SubmitLine`: sbatch's command line as typed (job line only; 20.11+).
    pub submit_line: Option<String>,
    pub fields: BTreeMap<String, String>,
}

/// `cpu=00:00:04,energy=0,fs/disk=2012,mem=1205656K,pages=0,vmem=...`: the value of `key`.
pub fn tres_usage<'a>(tres: &'a str, key: &str) -> Option<&'a str> {
    tres.split(',')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// How a step's memory per node was read from sacct: which figure, over how many tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StepMemoryBasis {
    /// One task: its `MaxRSS` is the step's.
    OneTask,
    /// Several tasks on one node: `TRESUsageInTot` `mem=`, the sum over the tasks.
    TasksSum { tasks: u64 },
    /// Several tasks over several nodes: `⌈tasks / nodes⌉` tasks on a node (tasks spread
    /// evenly, as Slurm's block distribution does), each at most the largest task's peak.
    /// `TRESUsageInTot` is not used here: for a multi-node step on 22.05.8 it was one node's
    /// sum, not the step's (a captured 2 × 2-task step: `mem=613.50M` for four tasks of
    /// 307 MiB), and for the extern step the sum over both nodes.
    TasksPerNode { tasks: u64, nodes: u64 },
    /// Several tasks (or an unknown count) and no sum: `MaxRSS`, the largest single task —
    /// a floor for the step.
    LargestTask { tasks: Option<u64> },
}

impl StepMemoryBasis {
    /// The basis in words, for `basis` fields and the text report.
    pub fn describe(&self) -> String {
        match self {
            StepMemoryBasis::OneTask => "sacct MaxRSS: one task".into(),
            StepMemoryBasis::TasksSum { tasks } => {
                format!("sacct: sum of {tasks} tasks' peaks (TRESUsageInTot)")
            }
            StepMemoryBasis::TasksPerNode { tasks, nodes } => format!(
                "sacct: {} tasks per node (of {tasks} over {nodes} nodes, spread evenly) × the largest task's peak",
                tasks.div_ceil(*nodes)
            ),
            StepMemoryBasis::LargestTask { tasks: Some(n) } => {
                format!("sacct MaxRSS: largest of {n} tasks (a floor: the tasks together used more)")
            }
            StepMemoryBasis::LargestTask { tasks: None } => {
                "sacct MaxRSS: largest task (a floor when the step ran several)".into()
            }
        }
    }
}

/// A step's memory on one node as sacct saw it: what the tasks there used together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StepMemory {
    pub bytes_per_node: u64,
    pub basis: StepMemoryBasis,
}

/// Where the job's CPU seconds came from in sacct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuBasis {
    /// The sum of the step lines' `TotalCPU` (the meaningful figure).
    StepsTotalCpu,
    /// No step lines: the job line's `TotalCPU`.
    JobLineTotalCpu,
}

impl CpuBasis {
    pub fn describe(&self) -> &'static str {
        match self {
            CpuBasis::StepsTotalCpu => "sacct TotalCPU summed over the steps",
            CpuBasis::JobLineTotalCpu => {
                "sacct TotalCPU of the job line (no step lines in the record)"
            }
        }
    }
}

impl Line {
    /// The typed members from `field` (a column's value, `None` where sacct printed no such
    /// column), timestamps read by `time` ([`parse_time`] or its cache); `fields` is left
    /// empty for the caller to fill.
    fn typed<'v>(
        field: &dyn Fn(&'static str) -> Option<&'v str>,
        time: &dyn Fn(&str) -> Option<i64>,
    ) -> Option<Line> {
        let get = |k: &'static str| -> &'v str { field(k).unwrap_or("") };
        let num = |k: &'static str| get(k).trim().parse::<u64>().ok();
        let non_empty = |k: &'static str| {
            Some(get(k).trim())
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let job_id = get("JobID").trim().to_string();
        if job_id.is_empty() {
            return None;
        }
        let step = job_id.split_once('.').map(|(_, s)| s.to_string());
        let (eligible, start) = (time(get("Eligible")), time(get("Start")));
        let planned = field("Planned")
            .or_else(|| field("Reserved"))
            .and_then(parse_duration)
            .or_else(|| {
                let (e, s) = (eligible?, start?);
                (s >= e).then(|| (s - e) as f64)
            });
        let gpus_gres = field("AllocGRES").and_then(parse_gres_gpus);
        Some(Line {
            step,
            job_name: get("JobName").to_string(),
            user: non_empty("User"),
            uid: num("UID").map(|u| u as u32),
            state: State::parse(get("State")),
            exit_code: ExitCode::parse(get("ExitCode")),
            submit_unix: time(get("Submit")),
            eligible_unix: eligible,
            start_unix: start,
            end_unix: time(get("End")),
            elapsed_seconds: num("ElapsedRaw")
                .or_else(|| parse_duration(get("Elapsed")).map(|s| s as u64)),
            timelimit_minutes: num("TimelimitRaw")
                .or_else(|| parse_duration(get("Timelimit")).map(|s| (s / 60.0) as u64)),
            planned_seconds: planned,
            nodes: num("NNodes"),
            cpus: num("NCPUS").or_else(|| num("AllocCPUS")),
            req_cpus: num("ReqCPUS"),
            req_mem: ReqMem::parse(get("ReqMem")),
            req_tres: Tres::parse(get("ReqTRES")),
            alloc_tres: Tres::parse(get("AllocTRES")),
            alloc_gres_gpus: gpus_gres,
            node_list: non_empty("NodeList").filter(|n| n != "None assigned"),
            partition: non_empty("Partition"),
            total_cpu_seconds: parse_duration(get("TotalCPU")),
            user_cpu_seconds: parse_duration(get("UserCPU")),
            system_cpu_seconds: parse_duration(get("SystemCPU")),
            max_rss_bytes: parse_size(get("MaxRSS"), 1),
            ave_rss_bytes: parse_size(get("AveRSS"), 1),
            tasks: num("NTasks"),
            tres_usage_in_tot_mem_bytes: tres_usage(get("TRESUsageInTot"), "mem")
                .and_then(|v| parse_size(v, 1)),
            tres_usage_in_max_mem_bytes: tres_usage(get("TRESUsageInMax"), "mem")
                .and_then(|v| parse_size(v, 1)),
            work_dir: non_empty("WorkDir"),
            admin_comment: non_empty("AdminComment"),
            submit_line: non_empty("SubmitLine"),
            job_id,
            fields: BTreeMap::new(),
        })
    }

    /// GPUs allocated: TRES (either spelling), else the old `AllocGRES`.
    pub fn gpus_allocated(&self) -> Option<u64> {
        self.alloc_tres.gpus.or(self.alloc_gres_gpus)
    }

    /// What this step's tasks used together on one node (see [`StepMemoryBasis`]); `None`
    /// without any memory figure.
    pub fn memory_per_node(&self) -> Option<StepMemory> {
        let largest = self.tres_usage_in_max_mem_bytes.max(self.max_rss_bytes);
        let nodes = self.nodes.filter(|&n| n > 0).unwrap_or(1);
        match (self.tasks, self.tres_usage_in_tot_mem_bytes) {
            (Some(1), _) => largest
                .or(self.tres_usage_in_tot_mem_bytes)
                .map(|b| StepMemory {
                    bytes_per_node: b,
                    basis: StepMemoryBasis::OneTask,
                }),
            (Some(tasks), Some(tot)) if tasks > 1 && nodes <= 1 => Some(StepMemory {
                bytes_per_node: tot.max(largest.unwrap_or(0)),
                basis: StepMemoryBasis::TasksSum { tasks },
            }),
            (Some(tasks), _) if tasks > 1 && nodes > 1 => largest.map(|l| {
                let nodes = nodes.min(tasks);
                StepMemory {
                    bytes_per_node: l.saturating_mul(tasks.div_ceil(nodes)),
                    basis: StepMemoryBasis::TasksPerNode { tasks, nodes },
                }
            }),
            (tasks, _) => largest.map(|b| StepMemory {
                bytes_per_node: b,
                basis: StepMemoryBasis::LargestTask { tasks },
            }),
        }
    }

    /// Memory per node of the allocation: AllocTRES `mem=` is the total over all nodes.
    pub fn memory_per_node_bytes(&self) -> Option<u64> {
        let total = self.alloc_tres.memory_bytes?;
        let nodes = self.alloc_tres.nodes.or(self.nodes).filter(|&n| n > 0)?;
        Some(total / nodes)
    }
}

/// A job's accounting: the job line and its step lines.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub job: Line,
    pub steps: Vec<Line>,
    /// Lines that could not be parsed (a field count that does not match the header).
    pub skipped_lines: usize,
}

impl Record {
    /// What tells this job apart in a window: `JobIDRaw` (an array task's own id), else the
    /// JobID as printed.
    pub fn key(&self) -> &str {
        self.job
            .fields
            .get("JobIDRaw")
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .unwrap_or(&self.job.job_id)
    }

    /// True when sacct still says RUNNING/PENDING without an end: the record is open, and may
    /// be stale (a lost end record) — its elapsed time grows with the clock.
    pub fn is_open(&self) -> bool {
        self.job.end_unix.is_none()
            && matches!(
                self.job.state.name.as_str(),
                "RUNNING" | "PENDING" | "REQUEUED" | "SUSPENDED" | "COMPLETING"
            )
    }

    /// The largest MaxRSS over the steps (the job line never has one).
    pub fn max_rss_bytes(&self) -> Option<u64> {
        self.steps.iter().filter_map(|s| s.max_rss_bytes).max()
    }

    /// The most any one step's tasks used together on a node: the largest
    /// [`Line::memory_per_node`] over the steps, with its basis.
    pub fn memory_per_node(&self) -> Option<StepMemory> {
        self.steps
            .iter()
            .filter_map(Line::memory_per_node)
            .max_by_key(|m| m.bytes_per_node)
    }

    /// CPU seconds and where they came from: the steps' TotalCPU, else (a record without
    /// step lines) the job line's.
    pub fn cpu_seconds(&self) -> Option<(f64, CpuBasis)> {
        if let Some(c) = self.steps_total_cpu_seconds() {
            return Some((c, CpuBasis::StepsTotalCpu));
        }
        if self.steps.is_empty() {
            return self
                .job
                .total_cpu_seconds
                .map(|c| (c, CpuBasis::JobLineTotalCpu));
        }
        None
    }

    /// CPU seconds over the steps (the job line's TotalCPU is not reliable on its own).
    pub fn steps_total_cpu_seconds(&self) -> Option<f64> {
        let v: Vec<f64> = self
            .steps
            .iter()
            .filter_map(|s| s.total_cpu_seconds)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    }

    /// Seconds between eligible (or submit) and start.
    pub fn queue_wait_seconds(&self) -> Option<i64> {
        let from = self.job.eligible_unix.or(self.job.submit_unix)?;
        let start = self.job.start_unix?;
        (start >= from).then_some(start - from)
    }
}

/// Parses `sacct --parsable2` output *with* its header line. Lines of a different job than
/// the first (an array's other tasks, when asked for `12345_*`) are kept apart by JobIDRaw
/// only for the first job; the rest are ignored.
pub fn parse(text: &str, delimiter: char) -> Option<Record> {
    let (lines, skipped) = parse_lines(text, delimiter);
    let mut job: Option<Line> = None;
    let mut steps = Vec::new();
    for line in lines {
        match (&job, &line.step) {
            (None, None) => job = Some(line),
            (Some(j), Some(_)) if line.job_id.starts_with(&format!("{}.", j.job_id)) => {
                steps.push(line)
            }
            (None, Some(_)) => steps.push(line),
            _ => {}
        }
    }
    let job = job?;
    steps.retain(|s| s.job_id.starts_with(&format!("{}.", job.job_id)));
    Some(Record {
        job,
        steps,
        skipped_lines: skipped,
    })
}

/// Every job of a multi-job answer (`-S/-E` windows), each with the step lines that follow
/// it (see [`group`]: a step line away from its job line is an orphan, dropped and counted);
/// unparsable lines (a field count that does not match the header, even after repair) are
/// counted, never fatal. Jobs keep sacct's order.
pub fn parse_many(text: &str, delimiter: char) -> Batch {
    let mut g = Grouper::new(delimiter, Kept::All);
    let mut records: Vec<Record> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| g.push(l))
        .collect();
    records.extend(g.finish());
    Batch {
        records,
        skipped_lines: g.tally.skipped_lines,
        orphan_steps: g.tally.orphan_steps,
    }
}

/// What [`parse_many`] and [`Query::window`] return.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Batch {
    pub records: Vec<Record>,
    /// Lines that could not be parsed.
    pub skipped_lines: usize,
    /// Step lines without their job line.
    pub orphan_steps: usize,
}

/// The header, then each line split, repaired where the `|` fallback split a user-typed
/// field, and typed. Returns the lines and how many were skipped.
fn parse_lines(text: &str, delimiter: char) -> (Vec<Line>, usize) {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let Some(first) = lines.next() else {
        return (Vec::new(), 0);
    };
    let mut cols = Columns::new(first, delimiter);
    let mut rejoin = Rejoin::new(delimiter, cols.width());
    let mut out = Vec::new();
    let mut skipped = 0;
    for l in lines {
        let Some(l) = rejoin.push(l) else { continue };
        match cols.line(&l, Kept::All) {
            Some(line) => out.push(line),
            None => skipped += 1,
        }
    }
    rejoin.finish();
    (out, skipped + rejoin.skipped)
}

/// How to run sacct.
#[derive(Debug, Clone)]
pub struct Query {
    /// The program: `sacct` on PATH unless `SLURMWATCH_SACCT` names another (tests use a fake).
    pub program: PathBuf,
    pub timeout: Duration,
    /// [`window`](Self::window) asks at most this much time per sacct call.
    pub chunk_seconds: i64,
}

impl Default for Query {
    fn default() -> Self {
        Query {
            program: std::env::var_os("SLURMWATCH_SACCT")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("sacct")),
            timeout: DEFAULT_TIMEOUT,
            chunk_seconds: WINDOW_CHUNK_SECONDS,
        }
    }
}

impl Query {
    /// The job's record. `job` must be a job id (`12345`, `12345_3`); checked here since it
    /// goes on a command line.
    pub fn job(&self, job: &str) -> Result<Record, SacctError> {
        if job.is_empty()
            || !job
                .chars()
                .all(|c| c.is_ascii_digit() || c == '_' || c == '+')
        {
            return Err(SacctError::Failed(format!("{job:?} is not a job id")));
        }
        let (text, delimiter) =
            self.run_fields(&["-j".to_string(), job.to_string()], self.timeout)?;
        parse(&text, delimiter).ok_or_else(|| SacctError::UnknownJob(job.to_string()))
    }

    /// Many jobs in one sacct call (`-j a,b,c`), each with its steps: what `slurmwatch jobs`
    /// asks, so a table of a thousand jobs costs one slurmdbd round trip, not a thousand.
    /// A plain id of an array job (`123`) answers all its tasks. Ids are checked here (they
    /// go on a command line); the same job answered twice (`123` and `123_4`) is kept once.
    pub fn jobs(&self, ids: &[String]) -> Result<Batch, SacctError> {
        if ids.is_empty() {
            return Ok(Batch::default());
        }
        for id in ids {
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '_' || c == '+')
            {
                return Err(SacctError::Failed(format!("{id:?} is not a job id")));
            }
        }
        let (text, delimiter) =
            self.run_fields(&["-j".to_string(), ids.join(",")], self.timeout)?;
        let b = parse_many(&text, delimiter);
        // A job answered twice keeps its later copy: parse_many files the steps under it.
        let mut out = Batch {
            skipped_lines: b.skipped_lines,
            orphan_steps: b.orphan_steps,
            records: Vec::new(),
        };
        let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for r in b.records {
            let key = r
                .job
                .fields
                .get("JobIDRaw")
                .filter(|v| !v.trim().is_empty())
                .cloned()
                .unwrap_or_else(|| r.job.job_id.clone());
            match seen.get(&key) {
                Some(&i) => out.records[i] = r,
                None => {
                    seen.insert(key, out.records.len());
                    out.records.push(r);
                }
            }
        }
        Ok(out)
    }

    /// Every job of a time window, with its steps: one bounded-time query, cut into chunks of
    /// at most `chunk_seconds` ([`WINDOW_CHUNK_SECONDS`] by default) so a long window never
    /// asks slurmdbd for months at once. A job running across a chunk boundary is listed by
    /// both chunks: it is kept once (the later answer, which has the more complete record).
    /// Holds every record: for a window of many jobs, [`window_each`](Self::window_each).
    pub fn window(&self, w: &Window) -> Result<Batch, SacctError> {
        let mut out = Batch::default();
        let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let tally = self.window_each(w, Kept::All, &mut |r| match seen.get(r.key()) {
            Some(&i) => out.records[i] = r.clone(),
            None => {
                seen.insert(r.key().to_string(), out.records.len());
                out.records.push(r.clone());
            }
        })?;
        out.skipped_lines = tally.skipped_lines;
        out.orphan_steps = tally.orphan_steps;
        Ok(out)
    }

    /// [`window`](Self::window) without holding it: each job is handed to `on_job` as soon as
    /// sacct has printed its last step, and nothing of sacct's text is kept (memory does not
    /// grow with the answer). A job listed by two chunks is handed on twice, the later the
    /// more complete: the consumer keeps one per [`Record::key`]. `self.timeout` bounds the
    /// time spent *waiting on sacct* over the whole window (every call, every retry); what
    /// `on_job` takes is not sacct's time and does not count. Lines reach `on_job` before
    /// sacct has exited: when a call then fails, the query fails, and what was handed on is
    /// the caller's to drop.
    pub fn window_each(
        &self,
        w: &Window,
        kept: Kept,
        on_job: &mut dyn FnMut(&Record),
    ) -> Result<Tally, SacctError> {
        if w.until_unix <= w.since_unix {
            return Err(SacctError::Failed(
                "the window is empty: --until must be later than --since".into(),
            ));
        }
        for u in &w.users {
            if u.is_empty()
                || !u
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-$".contains(c))
            {
                return Err(SacctError::Failed(format!("{u:?} is not a user name")));
            }
        }
        if let Some(p) = &w.partition {
            if p.is_empty()
                || !p
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-,".contains(c))
            {
                return Err(SacctError::Failed(format!("{p:?} is not a partition name")));
            }
        }
        // Parsed on a thread of its own and handed over in batches: the caller's work on each
        // job overlaps the parsing of the next ones (on two cores, close to half the wall
        // time of a site's month). Bounded: at most BATCHES_IN_FLIGHT batches wait.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Record>>(BATCHES_IN_FLIGHT);
        // Read batches go back to be dropped where they were allocated: freeing another
        // thread's allocations contends for its malloc arena (it doubled the CPU time).
        let (done_tx, done_rx) = std::sync::mpsc::channel::<Vec<Record>>();
        std::thread::scope(|s| {
            let parser = s.spawn(move || {
                let mut batch = Vec::with_capacity(JOBS_PER_BATCH);
                let tally = self.window_parse(w, kept, &mut |r| {
                    batch.push(r);
                    if batch.len() == JOBS_PER_BATCH {
                        while let Ok(mut old) = done_rx.try_recv() {
                            old.clear();
                        }
                        // A closed channel: the caller is unwinding; the rest is dropped.
                        let _ = tx.send(std::mem::replace(
                            &mut batch,
                            Vec::with_capacity(JOBS_PER_BATCH),
                        ));
                    }
                });
                let _ = tx.send(batch);
                drop(tx);
                tally
            });
            for batch in rx {
                batch.iter().for_each(&mut *on_job);
                let _ = done_tx.send(batch);
            }
            parser
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// [`window_each`](Self::window_each)'s chunks, each job handed to `on_job` as its last
    /// line is parsed.
    fn window_parse(
        &self,
        w: &Window,
        kept: Kept,
        on_job: &mut dyn FnMut(Record),
    ) -> Result<Tally, SacctError> {
        let mut budget = Budget::new(self.timeout);
        let mut tally = Tally::default();
        let mut from = w.since_unix;
        while from < w.until_unix {
            let to = (from + self.chunk_seconds.max(3600)).min(w.until_unix);
            let mut sel = vec![
                "-S".to_string(),
                sacct_time(from),
                "-E".to_string(),
                sacct_time(to),
            ];
            if w.all_users {
                sel.push("--allusers".into());
            } else if !w.users.is_empty() {
                sel.push("-u".into());
                sel.push(w.users.join(","));
            }
            if let Some(p) = &w.partition {
                sel.push("-r".into());
                sel.push(p.clone());
            }
            let mut g: Option<Grouper> = None;
            self.run_fields_each(&sel, &mut budget, &mut |delimiter, line| {
                let g = g.get_or_insert_with(|| Grouper::new(delimiter, kept));
                if let Some(r) = g.push(line) {
                    on_job(r);
                }
            })?;
            if let Some(mut g) = g {
                if let Some(r) = g.finish() {
                    on_job(r);
                }
                tally += g.tally;
            }
            from = to;
        }
        Ok(tally)
    }

    /// Runs sacct with `selector` (the job or window arguments) and the field list, retrying
    /// once per cause: a field this release calls invalid (renamed or dropped), then a
    /// refused `--delimiter`. Returns the text and the delimiter it is split by.
    fn run_fields(
        &self,
        selector: &[String],
        timeout: Duration,
    ) -> Result<(String, char), SacctError> {
        let mut fields: Vec<String> = FIELDS.iter().map(|s| s.to_string()).collect();
        let mut delimiter = DELIMITER;
        let deadline = Instant::now() + timeout;
        for _ in 0..4 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SacctError::TimedOut(timeout.as_secs().max(1)));
            }
            let args = field_args(selector, &fields, delimiter);
            let out = run_bounded(&self.program, &args, left)?;
            if out.status_ok {
                return Ok((out.stdout, delimiter));
            }
            retry_with(&mut fields, &mut delimiter, out.stderr.trim())?;
        }
        Err(SacctError::Failed(
            "sacct refused every field list tried".into(),
        ))
    }

    /// [`run_fields`](Self::run_fields) streamed: each non-blank line goes to `on_line` with
    /// the delimiter it is split by, within `budget`. A call that fails after printing
    /// lines is not retried (they have been handed on): the query fails.
    fn run_fields_each(
        &self,
        selector: &[String],
        budget: &mut Budget,
        on_line: &mut dyn FnMut(char, &str),
    ) -> Result<(), SacctError> {
        let mut fields: Vec<String> = FIELDS.iter().map(|s| s.to_string()).collect();
        let mut delimiter = DELIMITER;
        for _ in 0..4 {
            let args = field_args(selector, &fields, delimiter);
            let d = delimiter;
            let out = stream::run_lines(&self.program, &args, budget, &mut |l| on_line(d, l))?;
            if out.status_ok {
                return Ok(());
            }
            if out.lines > 0 {
                return Err(SacctError::Failed(first_line(out.stderr.trim())));
            }
            retry_with(&mut fields, &mut delimiter, out.stderr.trim())?;
        }
        Err(SacctError::Failed(
            "sacct refused every field list tried".into(),
        ))
    }
}

/// sacct's arguments: the selector, then the fields and the delimiter asked for.
fn field_args(selector: &[String], fields: &[String], delimiter: char) -> Vec<String> {
    let mut args: Vec<String> = selector.to_vec();
    args.extend(["--parsable2".into(), "-o".into(), fields.join(",")]);
    if delimiter == DELIMITER {
        args.push(format!("--delimiter={DELIMITER}"));
    }
    args
}

/// After a refused call: the field this release calls invalid swapped for its other name (or
/// dropped), else `|` for a refused `--delimiter`; the error when neither explains `err`.
fn retry_with(fields: &mut Vec<String>, delimiter: &mut char, err: &str) -> Result<(), SacctError> {
    if let Some(bad) = invalid_field(err) {
        let Some(pos) = fields.iter().position(|f| f.eq_ignore_ascii_case(&bad)) else {
            return Err(SacctError::Failed(first_line(err)));
        };
        let alt = RENAMED.iter().find_map(|(a, b)| {
            if a.eq_ignore_ascii_case(&bad) {
                Some(*b)
            } else if b.eq_ignore_ascii_case(&bad) {
                Some(*a)
            } else {
                None
            }
        });
        match alt {
            Some(a) if !fields.iter().any(|f| f == a) => fields[pos] = a.to_string(),
            _ => {
                fields.remove(pos);
            }
        }
        return Ok(());
    }
    if *delimiter == DELIMITER && err.contains("delimiter") {
        *delimiter = '|';
        return Ok(());
    }
    Err(SacctError::Failed(first_line(err)))
}

/// Jobs handed from the parsing thread to the caller of [`Query::window_each`] at a time…
const JOBS_PER_BATCH: usize = 256;
/// …and batches that may wait for it.
const BATCHES_IN_FLIGHT: usize = 8;

/// The longest stretch one sacct call is asked for in a window query.
pub const WINDOW_CHUNK_SECONDS: i64 = 7 * 86400;

/// A multi-job query: the jobs of `users` (or of everyone, or of the caller when neither is
/// given) that ran between `since_unix` and `until_unix`, optionally in one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    pub since_unix: i64,
    pub until_unix: i64,
    pub users: Vec<String>,
    pub all_users: bool,
    pub partition: Option<String>,
}

/// Unix seconds as sacct's `-S/-E` want them: local `YYYY-MM-DDTHH:MM:SS` (the `standard`
/// format [`parse_time`] reads back).
pub fn sacct_time(unix: i64) -> String {
    crate::sys::local_time(unix).map_or_else(|| "now".into(), |t| t.date_time('T'))
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    if l.is_empty() {
        "it exited with an error and printed nothing".into()
    } else {
        l.chars().take(300).collect()
    }
}

/// `sacct: error: Invalid field requested: "Planned"` → `Planned`.
fn invalid_field(stderr: &str) -> Option<String> {
    let l = stderr
        .lines()
        .find(|l| l.contains("Invalid field requested"))?;
    let rest = l.split("Invalid field requested").nth(1)?;
    let name: String = rest
        .trim_start_matches([':', ' '])
        .trim_matches(|c: char| c == '"' || c == '\'' || c.is_whitespace())
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

struct Output {
    status_ok: bool,
    stdout: String,
    stderr: String,
}

/// sacct through [`command::run_command`](super::command::run_command) (pinned time format and
/// locale, bounded wait, killed at the deadline; the child's exit is waited for, not polled,
/// so the answer is read the moment sacct exits), without a user's `SACCT_FORMAT`.
fn run_bounded(
    program: &PathBuf,
    args: &[String],
    timeout: Duration,
) -> Result<Output, SacctError> {
    use super::command::{run_command, CommandError};
    let mut cmd = Command::new(program);
    cmd.args(args).env_remove("SACCT_FORMAT");
    match run_command(cmd, timeout, None) {
        Ok(f) => Ok(Output {
            status_ok: f.success,
            stdout: f.stdout,
            stderr: f.stderr,
        }),
        Err(CommandError::NotFound { .. }) => Err(SacctError::Missing(format!(
            "{} not found",
            program.display()
        ))),
        Err(CommandError::Spawn { message, .. }) => Err(SacctError::Missing(format!(
            "cannot run {}: {message}",
            program.display()
        ))),
        Err(CommandError::Timeout { .. }) => Err(SacctError::TimedOut(timeout.as_secs().max(1))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_durations_states() {
        assert_eq!(parse_size("105460K", 1), Some(105460 * 1024));
        assert_eq!(
            parse_size("600.05M", 1),
            Some((600.05 * 1048576.0_f64).round() as u64)
        );
        assert_eq!(parse_size("0", 1), Some(0));
        assert_eq!(parse_size("", 1), None);
        assert_eq!(parse_size("12X", 1), None);
        assert_eq!(parse_duration("00:04.135"), Some(4.135));
        assert_eq!(parse_duration("1-02:03:04"), Some(93784.0));
        assert_eq!(parse_duration("UNLIMITED"), None);
        assert_eq!(
            State::parse("CANCELLED by 0"),
            State {
                name: "CANCELLED".into(),
                cancelled_by_uid: Some(0)
            }
        );
        assert_eq!(
            ExitCode::parse("0:125"),
            Some(ExitCode {
                code: 0,
                signal: 125
            })
        );
    }

    #[test]
    fn invalid_field_is_found() {
        assert_eq!(
            invalid_field("sacct: error: Invalid field requested: \"Planned\"\n"),
            Some("Planned".into())
        );
        assert_eq!(invalid_field("other"), None);
    }
}
