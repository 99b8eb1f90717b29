//! Across jobs: a window of finished jobs from sacct (plus their recorded files where they
//! exist) rolled up into workloads, `#SBATCH` sizing advice per workload, and the patterns a
//! single job cannot show (repeated failure, memory hand-searched across OOM kills, nodes that
//! eat jobs). Pure once the runs are built: [`analyse`] does no I/O.

pub mod brief;
#[doc(hidden)]
#[cfg(feature = "test-support")]
pub mod fixture;
pub mod patterns;
pub mod runs;
pub mod sizing;
// Small statistics live at the bottom floor (the throughput's median uses them too).
pub use crate::stats;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::locate::{Locator, Wanted};
use crate::slurm::hostlist;
use crate::slurm::sacct::{JobAccounting, ReqMem, StepMemoryBasis};

pub use brief::Brief;
pub use patterns::Pattern;
pub use runs::Runs;
pub use sizing::{Advice, Verdict};

/// Version of the `history --json` / `sizing --json` layout.
pub const SCHEMA: u32 = 1;

/// Cost ranking: one GPU-hour counts as this many core-hours. A typical GPU node carries
/// 4 cards beside 128 cores, so a card's share of the node is 32 cores; sites that bill
/// GPUs higher only make GPU workloads rank higher still.
pub const GPU_HOUR_IN_CORE_HOURS: f64 = 32.0;

/// Workloads shown before the fold unless `--top` says otherwise.
pub const DEFAULT_TOP: usize = 20;

/// How a run ended, as the history counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Completed,
    Failed,
    Timeout,
    OutOfMemory,
    Cancelled,
    NodeFail,
    Other,
}

impl Outcome {
    fn of(state: &str) -> Outcome {
        match state {
            "COMPLETED" => Outcome::Completed,
            "FAILED" => Outcome::Failed,
            "TIMEOUT" | "DEADLINE" => Outcome::Timeout,
            "OUT_OF_MEMORY" => Outcome::OutOfMemory,
            "CANCELLED" => Outcome::Cancelled,
            "NODE_FAIL" | "BOOT_FAIL" => Outcome::NodeFail,
            _ => Outcome::Other,
        }
    }

    /// Died on its own (not cancelled, not preempted): what "failures" counts.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Failed | Outcome::Timeout | Outcome::OutOfMemory | Outcome::NodeFail
        )
    }
}

/// What a run's recording says, all its nodes merged, where one was found: the figures of its
/// files or of its summary in slurmdbd, and which.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunRecording {
    /// The file read (on a multi-node job, the first node's), or [`SLURMDBD_LABEL`].
    pub file: PathBuf,
    /// Read from the job's summary in slurmdbd (no file opened).
    pub summary_in_slurmdbd: bool,
    /// How many nodes' files were merged. Peaks are the largest node's (what `--mem` and
    /// `--gres` apply to), CPU seconds and kills are summed.
    pub nodes_recorded: usize,
    pub peak_working_set_bytes: Option<u64>,
    pub peak_effective_cores: Option<f64>,
    pub cpu_seconds: Option<f64>,
    pub oom_kills: Option<u64>,
    /// Cards the recording saw, and how many of them were used (mean utilization ≥ 5 %).
    pub gpus_seen: usize,
    pub gpus_used: usize,
}

/// One finished job, as the history needs it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    pub job_id: String,
    /// The job's own id (`slurm::job_id::raw_id`): what its recording is named by; `None`
    /// when sacct printed no `JobIDRaw` for an array task or het component.
    pub raw_id: Option<u32>,
    pub name: String,
    pub user: Option<String>,
    pub partition: Option<String>,
    pub state: String,
    pub outcome: Outcome,
    pub exit_code: Option<i32>,
    pub submit_unix: Option<i64>,
    pub start_unix: Option<i64>,
    pub end_unix: Option<i64>,
    pub elapsed_seconds: Option<f64>,
    pub timelimit_seconds: Option<f64>,
    /// CPUs per node of the allocation.
    pub cpus_per_node: Option<u64>,
    pub cpus_total: Option<u64>,
    pub nodes: u64,
    pub gpus: u64,
    /// The job's nodes, expanded (empty when sacct printed none or an unreadable list).
    pub node_names: Vec<String>,
    /// The memory request per node (`--mem`, or `--mem-per-cpu` × CPUs per node).
    pub mem_request_bytes: Option<u64>,
    /// `--mem=0`: all of each node's memory.
    pub mem_whole_node: bool,
    /// CPU seconds: the recording's, else the sum of sacct's step TotalCPU.
    pub cpu_seconds: Option<f64>,
    pub max_rss_bytes: Option<u64>,
    /// What one step's tasks used together on a node, from sacct (`TRESUsageInTot` over
    /// `NTasks`, else `MaxRSS`), with how it was read.
    pub sacct_memory: Option<crate::slurm::sacct::StepMemory>,
    pub recorded: Option<RunRecording>,
}

impl Run {
    /// From sacct's job and step lines. `None` for a job that has not finished (no end, or
    /// RUNNING/PENDING): the history is about finished work. `None` too for slurmdbd's
    /// partial record of a job that just ended (its name and request are placeholders for a
    /// few seconds, [`JobAccounting::is_partial`]): counted with the unfinished, never filed under
    /// the workload `allocation`.
    pub fn from_record(r: &JobAccounting) -> Option<Run> {
        Run::from_prepared(r, Run::prepare(r))
    }

    /// What [`from_record`](Self::from_record) reads from the job's AdminComment, decoded:
    /// the costly part of a run, which needs nothing of the other jobs and so can be done on
    /// another thread (`Query::window_each_prepared`). `None` for a job not finished (no run)
    /// or without a summary of ours.
    pub fn prepare(r: &JobAccounting) -> Option<SlurmdbdFigures> {
        if !Run::finished(r) {
            return None;
        }
        r.job
            .admin_comment
            .as_deref()
            .and_then(SlurmdbdFigures::from_admin_comment)
    }

    /// [`from_record`](Self::from_record) with [`prepare`](Self::prepare)'s answer for `r`.
    pub fn from_prepared(r: &JobAccounting, prepared: Option<SlurmdbdFigures>) -> Option<Run> {
        let j = &r.job;
        if !Run::finished(r) {
            return None;
        }
        let nodes = j.alloc_tres.nodes.or(j.nodes).unwrap_or(1).max(1);
        let cpus_total = j.alloc_tres.cpus.or(j.cpus);
        let cpus_per_node = cpus_total.map(|c| c.div_ceil(nodes));
        let (mem_request_bytes, mem_whole_node) = match j.req_mem {
            Some(ReqMem::Node { bytes: 0 }) => (j.memory_per_node_bytes(), true),
            Some(ReqMem::Node { bytes }) => (Some(bytes), false),
            Some(ReqMem::Cpu { bytes }) => (
                cpus_per_node
                    .map(|c| bytes.saturating_mul(c))
                    .or(j.memory_per_node_bytes()),
                false,
            ),
            None => (j.memory_per_node_bytes(), false),
        };
        let node_names = j
            .node_list
            .as_deref()
            .and_then(|l| hostlist::expand(l).ok())
            .unwrap_or_default();
        Some(Run {
            raw_id: r.raw_id(),
            job_id: j.job_id.clone(),
            name: j.job_name.clone(),
            user: j.user.clone(),
            partition: j.partition.clone(),
            outcome: Outcome::of(&j.state.name),
            state: j.state.name.clone(),
            exit_code: j.exit_code.map(|e| e.code),
            submit_unix: j.submit_unix,
            start_unix: j.start_unix,
            end_unix: j.end_unix,
            elapsed_seconds: j.elapsed_seconds.map(|e| e as f64),
            timelimit_seconds: j.timelimit_minutes.map(|m| m as f64 * 60.0),
            cpus_per_node,
            cpus_total,
            nodes,
            gpus: j.gpus_allocated().unwrap_or(0),
            node_names,
            mem_request_bytes,
            mem_whole_node,
            cpu_seconds: r.cpu_seconds().map(|(c, _)| c),
            max_rss_bytes: r.max_rss_bytes(),
            sacct_memory: r.memory_per_node(),
            recorded: prepared.map(RunRecording::from),
        })
    }

    fn finished(r: &JobAccounting) -> bool {
        !(r.is_open() || r.job.end_unix.is_none() || r.is_partial())
    }

    /// OOM-killed: Slurm's state, or a kill the recording saw.
    pub fn oom(&self) -> bool {
        brief::oom(
            self.outcome,
            self.recorded.as_ref().and_then(|r| r.oom_kills),
        )
    }

    /// Stopped at its time limit having done next to nothing: on average less than
    /// [`IDLE_MAX_CPU_SECONDS`](crate::analysis::IDLE_MAX_CPU_SECONDS) per
    /// [`IDLE_MIN_SECONDS`](crate::analysis::IDLE_MIN_SECONDS) (docs/design.md §8) over the
    /// whole run. sacct has no per-stretch CPU, so a run that computed and then hung counts as
    /// computing.
    pub fn hung(&self) -> bool {
        let cpu = self
            .recorded
            .as_ref()
            .and_then(|r| r.cpu_seconds)
            .or(self.cpu_seconds);
        brief::hung(self.outcome, cpu, self.elapsed_seconds)
    }

    /// Peak memory and what it came from: the recorded working set where there is one.
    pub fn memory_peak(&self) -> Option<(u64, MemoryBasis)> {
        if let Some(w) = self
            .recorded
            .as_ref()
            .and_then(|r| r.peak_working_set_bytes)
        {
            return Some((w, MemoryBasis::WorkingSet));
        }
        brief::sacct_peak(self.sacct_memory, self.max_rss_bytes)
            .map(|m| (m.bytes_per_node, MemoryBasis::Sacct(m.basis)))
    }

    pub fn core_hours(&self) -> f64 {
        self.elapsed_seconds.unwrap_or(0.0) * self.cpus_total.unwrap_or(0) as f64 / 3600.0
    }

    pub fn gpu_hours(&self) -> f64 {
        self.elapsed_seconds.unwrap_or(0.0) * self.gpus as f64 / 3600.0
    }

    /// When it was submitted (else started, else ended): orders runs in time.
    pub fn t(&self) -> i64 {
        self.submit_unix
            .or(self.start_unix)
            .or(self.end_unix)
            .unwrap_or(0)
    }
}

/// Where a run's memory peak came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryBasis {
    WorkingSet,
    /// From sacct: the sum over a step's tasks where sacct gives it, else the largest task.
    Sacct(StepMemoryBasis),
}

/// `s1e20` → `s#e#`: digit runs collapsed, so numbered runs of one thing group together.
pub fn workload_name(job_name: &str) -> String {
    let mut out = String::with_capacity(job_name.len());
    let mut in_digits = false;
    for c in job_name.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// For each run without a summary from slurmdbd ([`RunRecording::from_admin_comment`], set by
/// [`Run::from_record`]), finds its recorded files (`crate::locate`: the run's nodes' files in
/// the spool and the archives) and reads their summaries (the epilog's, else computed). A
/// file whose recording started outside the run (a job id reused after the accounting was
/// wiped) is not this run's and is ignored, as is an unreadable one. Returns how many runs
/// were given files.
pub fn attach_recordings(runs: &mut [Run], dirs: &[PathBuf]) -> usize {
    let mut found = Recordings::new(dirs);
    runs.iter_mut()
        .map(|run| found.attach(run))
        .filter(|&f| f)
        .count()
}

/// Runs' recordings, found by one [`Locator`] over the places (each directory listed once).
pub struct Recordings {
    locator: Locator,
}

impl Recordings {
    /// Over `dirs`, each a plain directory or a template, most current first.
    pub fn new(dirs: &[PathBuf]) -> Recordings {
        Recordings {
            locator: Locator::new(dirs.to_vec()),
        }
    }

    /// Attaches `run`'s recording (see [`attach_recordings`]); true when one was found.
    pub fn attach(&mut self, run: &mut Run) -> bool {
        // The summary from slurmdbd came with sacct's answer: no file to open.
        let Some(job_id) = run.raw_id.filter(|_| run.recorded.is_none()) else {
            return false;
        };
        // Slurm's node list is the allocation: no other node's file is looked for.
        let files = self.locator.files(&Wanted {
            job_id,
            nodes: &run.node_names,
            user: run.user.as_deref(),
            uid: None,
            other_nodes: false,
        });
        // One recording per node (the first found), merged.
        let mut per_node: Vec<(String, RunRecording)> = Vec::new();
        for p in &files {
            if let Some((node, r)) = read_recording(p, run) {
                if !per_node.iter().any(|(n, _)| *n == node) {
                    per_node.push((node, r));
                }
            }
        }
        match merge_nodes(per_node.into_iter().map(|(_, r)| r).collect()) {
            Some(r) => {
                run.recorded = Some(r);
                true
            }
            None => false,
        }
    }
}

fn merge_nodes(rs: Vec<RunRecording>) -> Option<RunRecording> {
    let mut it = rs.into_iter();
    let mut m = it.next()?;
    for r in it {
        m.nodes_recorded += 1;
        m.peak_working_set_bytes = m.peak_working_set_bytes.max(r.peak_working_set_bytes);
        m.peak_effective_cores = match (m.peak_effective_cores, r.peak_effective_cores) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        m.cpu_seconds = match (m.cpu_seconds, r.cpu_seconds) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        m.oom_kills = match (m.oom_kills, r.oom_kills) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        m.gpus_seen = m.gpus_seen.max(r.gpus_seen);
        m.gpus_used = m.gpus_used.max(r.gpus_used);
    }
    Some(m)
}

/// Slack allowed between sacct's start/end and the recording's start (clock steps, the
/// extern step starting before the batch step).
const RECORDING_MATCH_SLACK_MS: i64 = 120_000;

fn read_recording(path: &Path, run: &Run) -> Option<(String, RunRecording)> {
    use crate::analysis::Summary;
    use crate::store::{summary, Reader};
    let reader = Reader::open(path).ok()?;
    let meta = reader.meta().ok()?;
    if run.raw_id.map(u64::from) != Some(meta.job_id) {
        return None;
    }
    if let (Some(s), Some(e)) = (run.start_unix, run.end_unix) {
        let t = meta.started_unix_ms;
        if t < s * 1000 - RECORDING_MATCH_SLACK_MS || t > e * 1000 + RECORDING_MATCH_SLACK_MS {
            return None;
        }
    }
    let s = match summary::read(&reader)
        .ok()
        .flatten()
        .as_deref()
        .and_then(Summary::from_pairs)
    {
        Some(s) => s,
        None => crate::analysis::summary::from_reader(&reader).ok()?,
    };
    Some((
        meta.node.clone(),
        RunRecording::from_summary(path, false, &s),
    ))
}

impl RunRecording {
    /// One node's figures from its summary (`file`: where it was read).
    fn from_summary(file: &Path, in_slurmdbd: bool, s: &crate::analysis::Summary) -> RunRecording {
        RunRecording {
            file: file.to_path_buf(),
            summary_in_slurmdbd: in_slurmdbd,
            nodes_recorded: 1,
            peak_working_set_bytes: s.peak_working_set_bytes,
            peak_effective_cores: s.peak_effective_cores,
            cpu_seconds: s.cpu_usage_seconds_total,
            oom_kills: s.oom_kills,
            gpus_seen: s.gpus.len(),
            gpus_used: used_cards(s.gpus.iter().map(|g| g.mean_utilization_percent)),
        }
    }

    /// From the job's summary in slurmdbd (its AdminComment), all nodes merged; `None` when
    /// the comment is not ours or is damaged (the files are then looked for).
    pub fn from_admin_comment(comment: &str) -> Option<RunRecording> {
        SlurmdbdFigures::from_admin_comment(comment).map(RunRecording::from)
    }
}

/// A job's figures from its summary in slurmdbd, all nodes merged: a [`RunRecording`] without its
/// label, plain data, made on one thread and used on another (see [`Run::prepare`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlurmdbdFigures {
    pub nodes_recorded: usize,
    pub peak_working_set_bytes: Option<u64>,
    pub peak_effective_cores: Option<f64>,
    pub cpu_seconds: Option<f64>,
    pub oom_kills: Option<u64>,
    pub gpus_seen: usize,
    pub gpus_used: usize,
}

impl SlurmdbdFigures {
    /// See [`RunRecording::from_admin_comment`].
    pub fn from_admin_comment(comment: &str) -> Option<SlurmdbdFigures> {
        // Only the figures read here are decoded (the history path meets one per job).
        let nodes = crate::analysis::admin_comment::decode_figures(comment).ok()?;
        let m = merge_nodes(
            nodes
                .iter()
                .map(|n| RunRecording {
                    file: PathBuf::new(), // no allocation: labelled by `RunRecording::from`
                    summary_in_slurmdbd: true,
                    nodes_recorded: 1,
                    peak_working_set_bytes: n.peak_working_set_bytes,
                    peak_effective_cores: n.peak_effective_cores,
                    cpu_seconds: n.cpu_usage_seconds_total,
                    oom_kills: n.oom_kills,
                    gpus_seen: n.gpu_mean_utilization_percent.len(),
                    gpus_used: used_cards(n.gpu_mean_utilization_percent.iter().copied()),
                })
                .collect(),
        )?;
        Some(SlurmdbdFigures {
            nodes_recorded: m.nodes_recorded,
            peak_working_set_bytes: m.peak_working_set_bytes,
            peak_effective_cores: m.peak_effective_cores,
            cpu_seconds: m.cpu_seconds,
            oom_kills: m.oom_kills,
            gpus_seen: m.gpus_seen,
            gpus_used: m.gpus_used,
        })
    }
}

impl From<SlurmdbdFigures> for RunRecording {
    fn from(f: SlurmdbdFigures) -> RunRecording {
        RunRecording {
            file: PathBuf::from(SLURMDBD_LABEL),
            summary_in_slurmdbd: true,
            nodes_recorded: f.nodes_recorded,
            peak_working_set_bytes: f.peak_working_set_bytes,
            peak_effective_cores: f.peak_effective_cores,
            cpu_seconds: f.cpu_seconds,
            oom_kills: f.oom_kills,
            gpus_seen: f.gpus_seen,
            gpus_used: f.gpus_used,
        }
    }
}

/// Cards used: mean utilization of at least 5 %.
fn used_cards(mean_utilization_percent: impl Iterator<Item = Option<f64>>) -> usize {
    mean_utilization_percent
        .filter(|u| u.is_some_and(|u| u >= 5.0))
        .count()
}

/// `RunRecording::file` for a summary read from slurmdbd.
pub const SLURMDBD_LABEL: &str = "slurmdbd:AdminComment";

/// Runs of one job name pattern and user, with their totals and advice.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// The collapsed name (`s#e#`).
    pub name: String,
    pub user: Option<String>,
    /// How many distinct real job names it covers, and a few of them.
    pub names_covered: usize,
    pub example_names: Vec<String>,
    pub runs: usize,
    pub completed: usize,
    pub failed: usize,
    pub cancelled: usize,
    pub timeouts: usize,
    pub hung: usize,
    pub out_of_memory: usize,
    /// Runs with a recorded file.
    pub recorded_runs: usize,
    pub core_hours: f64,
    pub gpu_hours: f64,
    /// core-hours + GPU-hours × [`GPU_HOUR_IN_CORE_HOURS`].
    pub cost_core_hours: f64,
    /// GPU-hours of runs that did not complete.
    pub wasted_gpu_hours: f64,
    pub states: BTreeMap<String, usize>,
    pub advice: Vec<Advice>,
    /// Indices into [`Analysis::runs`], oldest first.
    #[serde(skip)]
    pub run_indices: Vec<usize>,
}

/// Totals of the workloads not shown.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Fold {
    pub workloads: usize,
    pub runs: usize,
    pub failed: usize,
    pub core_hours: f64,
    pub gpu_hours: f64,
    pub cost_core_hours: f64,
    pub wasted_gpu_hours: f64,
}

/// Everything `history` and `sizing` print.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// Most costly first.
    pub workloads: Vec<Workload>,
    pub patterns: Vec<Pattern>,
    /// Nodes flagged by the node pattern, compressed (`cn[03,07]`), or `None`.
    pub exclude: Option<String>,
    /// The runs, in the order sacct listed them; [`Workload::run_indices`] index it.
    #[serde(skip)]
    pub runs: Vec<Brief>,
}

impl Analysis {
    /// The workloads past the first `top`, totalled: counted, not dropped.
    pub fn fold(&self, top: usize) -> Fold {
        let mut f = Fold::default();
        for w in self.workloads.iter().skip(top) {
            f.workloads += 1;
            f.runs += w.runs;
            f.failed += w.failed;
            f.core_hours += w.core_hours;
            f.gpu_hours += w.gpu_hours;
            f.cost_core_hours += w.cost_core_hours;
            f.wasted_gpu_hours += w.wasted_gpu_hours;
        }
        f
    }
}

/// Groups, ranks, sizes and looks for patterns. Pure (no recordings are looked for).
pub fn analyse(runs: Vec<Run>) -> Analysis {
    let mut all = Runs::new(None);
    for r in runs {
        all.push(r);
    }
    all.finish()
}

/// One workload's totals and advice from its runs (oldest first, `idx` their indices in
/// the analysis' runs) and their job names.
fn workload(
    (user, name): (Option<String>, String),
    mut names: Vec<&str>,
    rs: &[&Brief],
    idx: Vec<usize>,
) -> Workload {
    names.sort_unstable();
    names.dedup();
    let mut states = BTreeMap::new();
    for r in rs {
        *states.entry(r.state.to_string()).or_insert(0) += 1;
    }
    let core_hours: f64 = rs.iter().map(|r| r.core_hours()).sum();
    let gpu_hours: f64 = rs.iter().map(|r| r.gpu_hours()).sum();
    let advice = sizing::advise(rs);
    Workload {
        names_covered: names.len(),
        example_names: names.iter().take(3).map(|s| s.to_string()).collect(),
        runs: rs.len(),
        completed: rs
            .iter()
            .filter(|r| r.outcome == Outcome::Completed)
            .count(),
        failed: rs.iter().filter(|r| r.outcome.is_failure()).count(),
        cancelled: rs
            .iter()
            .filter(|r| r.outcome == Outcome::Cancelled)
            .count(),
        timeouts: rs.iter().filter(|r| r.outcome == Outcome::Timeout).count(),
        hung: rs.iter().filter(|r| r.hung()).count(),
        out_of_memory: rs.iter().filter(|r| r.oom()).count(),
        recorded_runs: rs.iter().filter(|r| r.recorded.is_some()).count(),
        core_hours,
        gpu_hours,
        cost_core_hours: core_hours + gpu_hours * GPU_HOUR_IN_CORE_HOURS,
        wasted_gpu_hours: rs
            .iter()
            .filter(|r| r.outcome != Outcome::Completed)
            .map(|r| r.gpu_hours())
            .sum(),
        states,
        advice,
        run_indices: idx,
        name,
        user,
    }
}

/// Ranks the workloads (most costly first) and looks for the patterns across them.
fn rank(mut workloads: Vec<Workload>, runs: Vec<Brief>) -> Analysis {
    workloads.sort_by(|a, b| {
        b.cost_core_hours
            .total_cmp(&a.cost_core_hours)
            .then(b.runs.cmp(&a.runs))
            .then(a.name.cmp(&b.name))
    });
    let (patterns, flagged) = patterns::find(&workloads, &runs);
    let exclude = (!flagged.is_empty()).then(|| hostlist::compress(&flagged));
    Analysis {
        workloads,
        patterns,
        exclude,
        runs,
    }
}

/// Builds the runs of a sacct answer (finished jobs only) and says how many were not.
pub fn runs_from(records: &[JobAccounting]) -> (Vec<Run>, usize) {
    let mut runs = Vec::with_capacity(records.len());
    let mut unfinished = 0;
    for r in records {
        match Run::from_record(r) {
            Some(run) => runs.push(run),
            None => unfinished += 1,
        }
    }
    (runs, unfinished)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_collapse() {
        assert_eq!(workload_name("s1e20"), "s#e#");
        assert_eq!(workload_name("s2e47"), "s#e#");
        assert_eq!(workload_name("train-1"), "train-#");
        assert_eq!(workload_name("bash"), "bash");
        assert_eq!(workload_name(""), "");
    }
}
