//! What a line of sacct and a job's record mean: the typed members read from the columns,
//! and what they add up to (memory per node and its basis, CPU seconds and theirs).

use std::collections::BTreeMap;

use serde::Serialize;

use super::fields::{parse_gres_gpus, tres_usage, ExitCode, ReqMem, State, Tres};
use crate::slurm::job_id;
use crate::slurm::units::{parse_duration, parse_size, split_once_ascii, trim};

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
    /// `AdminComment`: where slurmwatch's summary of the job lives (`JS1:…`, older `SW1:…`), or another
    /// tool's note; empty on step lines.
    pub admin_comment: Option<String>,
    /// `SubmitLine`: sbatch's command line as typed (job line only; 20.11+).
    pub submit_line: Option<String>,
    pub fields: BTreeMap<String, String>,
}

/// Declares [`Col`] and its names, in one order.
macro_rules! columns {
    ($($c:ident),* $(,)?) => {
        /// The columns [`Line::typed`] reads: found once per answer by name
        /// ([`Col::NAMES`]), then by number on each line, with no lookup by name (some forty
        /// a line: hashed, they were a seventh of a million-job window's parse).
        #[allow(clippy::upper_case_acronyms)]
        #[derive(Debug, Clone, Copy)]
        pub(super) enum Col { $($c),* }

        impl Col {
            /// Each column's name as sacct prints it in the header, in [`Col`]'s order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($c)),*];
        }
    };
}

columns!(
    JobID,
    Eligible,
    Start,
    Planned,
    Reserved,
    AllocGRES,
    JobName,
    User,
    UID,
    State,
    ExitCode,
    Submit,
    End,
    ElapsedRaw,
    Elapsed,
    TimelimitRaw,
    Timelimit,
    NNodes,
    NCPUS,
    AllocCPUS,
    ReqCPUS,
    ReqMem,
    ReqTRES,
    AllocTRES,
    NodeList,
    Partition,
    TotalCPU,
    UserCPU,
    SystemCPU,
    MaxRSS,
    AveRSS,
    NTasks,
    TRESUsageInTot,
    TRESUsageInMax,
    WorkDir,
    AdminComment,
    SubmitLine,
);

/// The name slurmdbd gives a job it has no name for (see [`JobAccounting::is_partial`]).
const PARTIAL_RECORD_NAME: &str = "allocation";

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
    /// The typed members from `field` (column `Col`'s value, `None` where sacct printed no
    /// such column), timestamps read by `time` ([`parse_time`] or its cache); `fields` is left
    /// empty for the caller to fill.
    ///
    /// Generic, not `dyn`: some forty lookups a line, each inlined (a million-job window).
    pub(super) fn typed<'v>(
        field: &impl Fn(Col) -> Option<&'v str>,
        time: &impl Fn(&str) -> Option<i64>,
    ) -> Option<Line> {
        let get = |k: Col| -> &'v str { field(k).unwrap_or("") };
        let num = |k: Col| trim(get(k)).parse::<u64>().ok();
        let non_empty = |k: Col| {
            Some(trim(get(k)))
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let job_id = trim(get(Col::JobID)).to_string();
        if job_id.is_empty() {
            return None;
        }
        let step = split_once_ascii(&job_id, b'.').map(|(_, s)| s.to_string());
        let (eligible, start) = (time(get(Col::Eligible)), time(get(Col::Start)));
        let planned = field(Col::Planned)
            .or_else(|| field(Col::Reserved))
            .and_then(parse_duration)
            .or_else(|| {
                let (e, s) = (eligible?, start?);
                (s >= e).then(|| (s - e) as f64)
            });
        let gpus_gres = field(Col::AllocGRES).and_then(parse_gres_gpus);
        Some(Line {
            step,
            job_name: get(Col::JobName).to_string(),
            user: non_empty(Col::User),
            uid: num(Col::UID).map(|u| u as u32),
            state: State::parse(get(Col::State)),
            exit_code: ExitCode::parse(get(Col::ExitCode)),
            submit_unix: time(get(Col::Submit)),
            eligible_unix: eligible,
            start_unix: start,
            end_unix: time(get(Col::End)),
            elapsed_seconds: num(Col::ElapsedRaw)
                .or_else(|| parse_duration(get(Col::Elapsed)).map(|s| s as u64)),
            timelimit_minutes: num(Col::TimelimitRaw)
                .or_else(|| parse_duration(get(Col::Timelimit)).map(|s| (s / 60.0) as u64)),
            planned_seconds: planned,
            nodes: num(Col::NNodes),
            cpus: num(Col::NCPUS).or_else(|| num(Col::AllocCPUS)),
            req_cpus: num(Col::ReqCPUS),
            req_mem: ReqMem::parse(get(Col::ReqMem)),
            req_tres: Tres::parse(get(Col::ReqTRES)),
            alloc_tres: Tres::parse(get(Col::AllocTRES)),
            alloc_gres_gpus: gpus_gres,
            node_list: non_empty(Col::NodeList).filter(|n| n != "None assigned"),
            partition: non_empty(Col::Partition),
            total_cpu_seconds: parse_duration(get(Col::TotalCPU)),
            user_cpu_seconds: parse_duration(get(Col::UserCPU)),
            system_cpu_seconds: parse_duration(get(Col::SystemCPU)),
            max_rss_bytes: parse_size(get(Col::MaxRSS), 1),
            ave_rss_bytes: parse_size(get(Col::AveRSS), 1),
            tasks: num(Col::NTasks),
            tres_usage_in_tot_mem_bytes: tres_usage(get(Col::TRESUsageInTot), "mem")
                .and_then(|v| parse_size(v, 1)),
            tres_usage_in_max_mem_bytes: tres_usage(get(Col::TRESUsageInMax), "mem")
                .and_then(|v| parse_size(v, 1)),
            work_dir: non_empty(Col::WorkDir),
            admin_comment: non_empty(Col::AdminComment),
            submit_line: non_empty(Col::SubmitLine),
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

/// A job's accounting as sacct prints it: its job line and its step lines (not one line of
/// sacct's output, a [`Line`], nor one record of its parsable text, `records::Cut::Record`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobAccounting {
    pub job: Line,
    pub steps: Vec<Line>,
    /// Lines that could not be parsed (a field count that does not match the header).
    pub skipped_lines: usize,
}

impl JobAccounting {
    /// The job's own id (an array task's own, the name its recording is filed under): the
    /// one rule, [`job_id::raw_id`], over `JobIDRaw` and `JobID`.
    pub fn raw_id(&self) -> Option<u32> {
        job_id::raw_id(
            self.job.fields.get("JobIDRaw").map(String::as_str),
            &self.job.job_id,
        )
    }

    /// What tells this job apart in a window: its own id ([`raw_id`](Self::raw_id)), else
    /// the JobID as printed.
    pub fn key(&self) -> job_id::Key<'_> {
        job_id::key(
            self.job.fields.get("JobIDRaw").map(String::as_str),
            &self.job.job_id,
        )
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

    /// True for slurmdbd's stand-in record: a job whose end (or a step) reached slurmdbd
    /// before its start record gets a row named `allocation` with no request and no limit
    /// (Slurm's as_mysql_job_start names a nameless job so); the start record fills it in
    /// seconds later. Seen on the test cluster right after short jobs ended (5 of 116 mails).
    /// Its name is not the job's, and its request and limit are unknown, not absent.
    pub fn is_partial(&self) -> bool {
        self.job.job_name == PARTIAL_RECORD_NAME
            && self
                .job
                .fields
                .get("ReqTRES")
                .is_none_or(|v| v.trim().is_empty())
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
        self.steps_sum(|s| s.total_cpu_seconds)
    }

    /// A figure summed over the step lines; `None` when no step has it (never a made-up 0).
    pub fn steps_sum(&self, get: impl Fn(&Line) -> Option<f64>) -> Option<f64> {
        let v: Vec<f64> = self.steps.iter().filter_map(get).collect();
        (!v.is_empty()).then(|| v.iter().sum())
    }

    /// Seconds between eligible (or submit) and start.
    pub fn queue_wait_seconds(&self) -> Option<i64> {
        let from = self.job.eligible_unix.or(self.job.submit_unix)?;
        let start = self.job.start_unix?;
        (start >= from).then_some(start - from)
    }
}
