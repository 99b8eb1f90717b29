//! The post-mortem of one job: its recording (if any) joined with sacct, findings and
//! `#SBATCH` advice; rendered as text, JSON, SVG or HTML.
//!
//! [`Report`] *is* the JSON (`--json`): every key documented in docs/reference/json.md's "The report"
//! section; units in key names; `null` for unknown, never a made-up 0; no NaN.

pub mod chart;
pub mod ended;
pub mod joblog;
pub mod node_summary;
pub mod nodes;
pub mod recordings;
pub mod text;
pub mod text_ledger;
pub mod text_phases;
pub mod text_throughput;
pub mod throughput;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

pub use crate::analysis::step_figures::StepFigures;
use crate::analysis::{self, Facts, Finding, GpuSummary, OomEvent, SbatchLine, Summary};
use crate::model::effective_cores;
use crate::model::{SampleRow, Series};
use crate::slurm::sacct;
use crate::store::{self, Event, GpuRow, JobMeta, Reader, StepInfo};

/// Version of the report's JSON.
pub const SCHEMA: u32 = 1;

/// Most points kept per chart series (bucket maxima): a 7-day file has 120,960 rows.
pub const CHART_POINTS: usize = 1200;

/// One node's recording of the job, read once: its file whole (rows and summary), or its
/// summary from slurmdbd without rows ([`Origin`]).
pub struct NodeRecording {
    /// The file read; for a summary from slurmdbd, a label naming it.
    pub path: PathBuf,
    pub origin: Origin,
    pub meta: JobMeta,
    pub steps: Vec<StepInfo>,
    pub events: Vec<Event>,
    pub job_rows: Vec<SampleRow>,
    pub summary: Summary,
    /// True when the summary came from the file (the epilog ran), false when computed now.
    pub summary_stored: bool,
    /// Each recorded step's own figures from its series, for the step lines when sacct is
    /// not asked (`--no-sacct`) or has none.
    pub step_figures: std::collections::BTreeMap<String, StepFigures>,
    /// The phases the job marked (`slurmwatch mark`), from this file's rows.
    pub phases: Vec<analysis::phases::Phase>,
    /// What places the log's progress in time (empty for a summary or an older file).
    pub progress: throughput::ProgressInputs,
}

/// Where a [`NodeRecording`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    /// The node's SQLite file (rows and all).
    #[default]
    File,
    /// The job's summary in slurmdbd's AdminComment ([`crate::analysis::admin_comment`]):
    /// figures, no rows.
    SlurmdbdSummary,
}

impl NodeRecording {
    /// Reads the job's file (read-only; never modified). One clear error on bad input.
    pub fn load(path: &Path) -> crate::error::Result<NodeRecording> {
        let reader = Reader::open(path)?;
        let meta = reader.meta()?;
        let steps = reader.steps()?;
        let events = reader.events()?;
        let job_rows = reader.samples(&Series::Job)?;
        // An older epilog's summary lacks what this version adds: computed again instead.
        let stored = analysis::summary::stored(&reader)?;
        let (summary, summary_stored) = match stored {
            Some(s) => (s, true),
            None => (
                analysis::summary::from_parts(&reader, &job_rows, &steps, &events)?,
                false,
            ),
        };
        let step_figures = reader
            .step_samples(&job_rows, |_| true)?
            .into_iter()
            .map(|(step, rows)| (step, StepFigures::from_rows(&rows)))
            .collect();
        let marked = events
            .iter()
            .any(|e| e.kind == analysis::phases::MARK_EVENT);
        let progress = throughput::ProgressInputs::load(&reader, marked)?;
        let phases = marked_phases(&reader, &events, &job_rows, &progress.cards)?;
        Ok(NodeRecording {
            path: path.to_path_buf(),
            origin: Origin::File,
            meta,
            steps,
            events,
            job_rows,
            summary,
            summary_stored,
            step_figures,
            phases,
            progress,
        })
    }
}

/// The marked phases, read from the series that has a row at every mark: the job's (marks
/// from the step that records it), else the marking step's own; failing both, the job's rows
/// interpolated (each phase says so).
fn marked_phases(
    reader: &Reader,
    events: &[Event],
    job_rows: &[SampleRow],
    cards: &[throughput::CardRows],
) -> crate::error::Result<Vec<analysis::phases::Phase>> {
    let marks = analysis::phases::marks(events);
    if marks.is_empty() {
        return Ok(Vec::new());
    }
    let has_rows_at_marks = |rows: &[SampleRow]| {
        marks
            .iter()
            .all(|m| rows.iter().any(|r| r.t_unix_ms == m.t_unix_ms))
    };
    let step_rows = match &marks[0].step {
        Some(step) if !has_rows_at_marks(job_rows) => {
            reader.samples(&Series::step(step.clone()))?
        }
        _ => Vec::new(),
    };
    let rows = if has_rows_at_marks(&step_rows) {
        &step_rows[..]
    } else {
        job_rows
    };
    // The cards' rows as they were read, not copied: a week of 8 cards is a million rows.
    let cards: Vec<&[GpuRow]> = cards.iter().map(|c| c.rows.as_slice()).collect();
    Ok(analysis::phases::phases(&marks, rows, &cards))
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct JobInfo {
    pub name: Option<String>,
    pub user: Option<String>,
    pub uid: Option<u32>,
    pub partition: Option<String>,
    pub nodes: Option<u64>,
    pub node_list: Option<String>,
    pub submit_unix: Option<i64>,
    pub start_unix: Option<i64>,
    pub end_unix: Option<i64>,
    pub queue_wait_seconds: Option<i64>,
    pub timelimit_seconds: Option<u64>,
    pub cancelled_by_uid: Option<u32>,
    pub work_dir: Option<String>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct TresInfo {
    pub requested: Option<sacct::Tres>,
    pub allocated: Option<sacct::Tres>,
    pub req_mem: Option<sacct::ReqMem>,
    /// `ReqMem` `0n`: all of each node's memory (not zero).
    pub req_mem_whole_node: bool,
    pub memory_per_node_bytes: Option<u64>,
    pub gpus_allocated: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct CpuInfo {
    pub usage_seconds_total: Option<f64>,
    pub user_seconds: Option<f64>,
    pub system_seconds: Option<f64>,
    pub cores_allocated: Option<f64>,
    pub peak_effective_cores: Option<f64>,
    pub peak_effective_cores_at_unix_ms: Option<i64>,
    pub average_effective_cores: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct MemoryInfo {
    pub peak_working_set_bytes: Option<u64>,
    pub peak_working_set_at_unix_ms: Option<i64>,
    /// The node where it happened (memory peaks are per node: what `--mem` applies to).
    pub peak_working_set_node: Option<String>,
    pub lifetime_peak_bytes: Option<u64>,
    pub limit_bytes: Option<u64>,
    pub oom_kills: Option<u64>,
    pub oom_events: Vec<OomEvent>,
    pub sacct_max_rss_bytes: Option<u64>,
    /// What one step's tasks used together on a node, from sacct (the sum over its tasks,
    /// else the largest task), and how it was read.
    pub sacct_memory_per_node_bytes: Option<u64>,
    pub sacct_memory_basis: Option<String>,
    pub major_faults: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct StepLine {
    pub step: String,
    pub state: Option<String>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub start_unix: Option<i64>,
    pub end_unix: Option<i64>,
    pub elapsed_seconds: Option<u64>,
    pub total_cpu_seconds: Option<f64>,
    pub max_rss_bytes: Option<u64>,
    /// The step's working-set peak from its recorded series (sacct has no such figure).
    pub peak_working_set_bytes: Option<u64>,
    pub tasks: Option<u32>,
    /// The step appears in the recording.
    pub recorded: bool,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct SamplerInfo {
    pub cpu_seconds: Option<f64>,
    pub bytes_written: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct SacctDump {
    pub job: std::collections::BTreeMap<String, String>,
    pub steps: Vec<std::collections::BTreeMap<String, String>>,
}

/// One point of the charts (bucket maxima over [`CHART_POINTS`] buckets).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Point {
    pub t_unix_ms: i64,
    pub working_set_bytes: Option<u64>,
    pub cache_bytes: Option<u64>,
    pub limit_bytes: Option<u64>,
    pub cores: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: u32,
    pub job_id: String,
    /// `recorded_file`, `slurmdbd_summary` (the epilog's summary from the job's
    /// AdminComment: figures without charts) or `sacct_only`.
    pub source: &'static str,
    pub file: Option<String>,
    /// The epilog's summary was in the file (`true`) or computed by the report (`false`).
    pub summary_stored: Option<bool>,
    pub state: Option<String>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub elapsed_seconds: Option<f64>,
    pub job: JobInfo,
    pub tres: TresInfo,
    pub cpu: CpuInfo,
    pub memory: MemoryInfo,
    pub gpus: Vec<GpuSummary>,
    /// CPU, memory, time and GPU efficiencies, each with its basis (`analysis::efficiency`).
    pub efficiency: analysis::efficiency::Efficiencies,
    /// Where the allocation went, exactly (`analysis::ledger`); null without a recording.
    pub ledger: Option<analysis::ledger::Ledger>,
    /// The phases the job marked (`slurmwatch mark`), from the batch node's file: each
    /// one's duration, CPU, GPU time, energy and peak working set.
    pub phases: Vec<analysis::phases::Phase>,
    /// The job's own progress from its log, placed in time, and its slowdowns; null without
    /// progress lines or the output sizes to place them (`report::throughput`).
    pub throughput: Option<throughput::Throughput>,
    /// Every node of the allocation: its own figures, or `recorded: false`.
    pub nodes: Vec<nodes::NodeLine>,
    pub steps: Vec<StepLine>,
    pub findings: Vec<Finding>,
    pub sbatch: Vec<SbatchLine>,
    pub sampler: SamplerInfo,
    pub notes: Vec<String>,
    pub sacct: Option<SacctDump>,
    pub sacct_error: Option<String>,
    /// The job's own stdout/stderr: where they were, what was read; null with `--no-log`.
    pub log: Option<joblog::LogInfo>,
    /// The last Python traceback from the log, for the text report.
    #[serde(skip)]
    pub log_excerpt: Vec<String>,
    #[serde(skip)]
    pub points: Vec<Point>,
    /// One chart line per node (multi-node jobs only).
    #[serde(skip)]
    pub node_points: Vec<(String, Vec<Point>)>,
    #[serde(skip)]
    pub step_marks: Vec<(String, Option<i64>, Option<i64>)>,
}

impl Report {
    /// Strict JSON (serde_json writes no NaN: non-finite floats become `null`).
    pub fn to_json(&self) -> String {
        let v = serde_json::to_value(self).unwrap_or(Value::Null);
        serde_json::to_string_pretty(&v).unwrap_or_else(|_| "null".into())
    }
}

impl Report {
    /// Adds the job's own progress from its log: the `throughput` object, each phase's rate,
    /// and the throughput's findings.
    pub fn attach_throughput(&mut self, t: throughput::Throughput) {
        throughput::rate_per_phase(&t, &mut self.phases);
        self.findings.extend(throughput::findings(&t, &self.phases));
        self.throughput = Some(t);
    }

    /// Adds what the job's log showed: the `log` object, and its findings merged into
    /// `findings[]` (a code already there, `command_not_found` from exit 127, gains the log's
    /// facts instead of a second entry).
    pub fn attach_log(&mut self, mut info: joblog::LogInfo, scan: &analysis::joblog::Scan) {
        let found = scan.findings();
        info.codes = found.iter().map(|f| f.code).collect();
        self.log_excerpt = scan
            .traceback
            .as_ref()
            .map(|t| t.lines.clone())
            .unwrap_or_default();
        analysis::joblog::merge_findings(&mut self.findings, found);
        self.log = Some(info);
    }
}

/// How to enable a recording, said when there is none.
pub const ENABLE_HINT: &str =
    "no time series was recorded for this job; add `#SBATCH --slurmwatch` to the job script (or ask your admins for `default=on`) to record one next time";

/// Joins what is known. Either input may be missing (not both: the caller checks).
///
/// `recs`: one file per node of the job (any order; empty when nothing was recorded). The
/// batch node's file gives the steps and the charts' job lines; the figures are merged
/// over all nodes ([`nodes::merge_summaries`]), and `nodes[]` lists every node of the
/// allocation, recorded or not.
pub fn build(
    job_id: &str,
    recs: &[NodeRecording],
    acct: Option<&sacct::JobAccounting>,
    sacct_error: Option<String>,
    no_recording_reason: Option<String>,
) -> Report {
    build_with(
        job_id,
        recs,
        acct,
        sacct_error,
        no_recording_reason,
        &analysis::Thresholds::default(),
    )
}

/// [`build`] under a site's thresholds (the CLI's site file) instead of the defaults.
pub fn build_with(
    job_id: &str,
    recs: &[NodeRecording],
    acct: Option<&sacct::JobAccounting>,
    sacct_error: Option<String>,
    no_recording_reason: Option<String>,
    thresholds: &analysis::Thresholds,
) -> Report {
    let merged = (!recs.is_empty()).then(|| nodes::merge_summaries(recs));
    let s = Sources {
        recs,
        primary: primary(recs),
        merged: merged.as_ref(),
        acct,
        job_line: acct.map(|a| &a.job),
        thresholds,
    };
    let mut notes = Vec::new();
    if s.primary.is_none() {
        notes.push(no_recording_note(no_recording_reason));
    }
    let rec_span = s.recorded_span_seconds();
    let elapsed = s.elapsed_seconds(rec_span);
    let job = s.job_info();
    let tres = s.tres_info();
    let cpu_sourced = s.cpu_seconds();
    let cpu = s.cpu_info(cpu_sourced.as_ref().map(|c| c.value), rec_span, elapsed);
    let memory = s.memory_info(&mut notes);
    let gpus = s.merged.map(|m| m.gpus.clone()).unwrap_or_default();
    let efficiency = analysis::efficiency::compute(&s.efficiency_inputs(
        &memory,
        cpu_sourced,
        elapsed,
        cpu.cores_allocated,
        &gpus,
        tres.gpus_allocated,
    ));
    let ledger = s.ledger(cpu.cores_allocated);
    let steps = step_lines(s.primary, acct);
    let facts = s.facts(&job, &cpu, &memory, elapsed, &gpus);
    let (findings, node_lines) = s.findings(&facts);
    let sbatch = analysis::sbatch(&facts, thresholds);
    s.source_notes(&mut notes);
    let limit = memory.limit_bytes;
    Report {
        schema: SCHEMA,
        job_id: job_id.to_string(),
        source: s.source(),
        file: s
            .primary
            .filter(|r| r.origin == Origin::File)
            .map(|r| r.path.display().to_string()),
        summary_stored: s.primary.map(|r| r.summary_stored),
        state: facts.state.clone(),
        exit_code: facts.exit_code,
        exit_signal: facts.exit_signal,
        elapsed_seconds: elapsed,
        job,
        tres,
        cpu,
        memory,
        gpus,
        efficiency,
        ledger,
        phases: s.primary.map(|r| r.phases.clone()).unwrap_or_default(),
        throughput: None,
        nodes: node_lines,
        steps,
        findings,
        sbatch,
        sampler: SamplerInfo {
            cpu_seconds: s
                .merged
                .and_then(|m| m.sampler_cpu_usec)
                .map(|u| u as f64 / 1e6),
            bytes_written: s.merged.and_then(|m| m.sampler_bytes_written),
        },
        notes,
        sacct: acct.map(|a| SacctDump {
            job: a.job.fields.clone(),
            steps: a.steps.iter().map(|s| s.fields.clone()).collect(),
        }),
        sacct_error,
        log: None,
        log_excerpt: Vec::new(),
        points: s
            .primary
            .map(|r| points(&r.job_rows, limit))
            .unwrap_or_default(),
        node_points: s.node_points(limit),
        step_marks: s.step_marks(),
    }
}

/// Said when there is no recording: why (where the caller knows), and how to get one.
fn no_recording_note(reason: Option<String>) -> String {
    match reason {
        Some(r) => format!("{r}: {ENABLE_HINT}."),
        None => format!("{}{}.", ENABLE_HINT[..1].to_uppercase(), &ENABLE_HINT[1..]),
    }
}

/// What a report is built from: every node's recording, the primary one ([`primary`]),
/// their merged summary, and sacct's record (`job_line`: its job line). Each method reads one
/// part of the report from them.
struct Sources<'a> {
    recs: &'a [NodeRecording],
    primary: Option<&'a NodeRecording>,
    merged: Option<&'a Summary>,
    acct: Option<&'a sacct::JobAccounting>,
    job_line: Option<&'a sacct::Line>,
    /// The findings' thresholds (the site file's, or the defaults).
    thresholds: &'a analysis::Thresholds,
}

impl Sources<'_> {
    /// The exact ledger over the recorded span, from the merged summary's counters.
    fn ledger(&self, cores_allocated: Option<f64>) -> Option<analysis::ledger::Ledger> {
        let sources: Vec<_> = self.recs.iter().map(|r| r.meta.source).collect();
        Some(analysis::ledger::of_summary(
            self.merged?,
            self.recs.len(),
            &sources,
            cores_allocated,
        ))
    }

    /// From the first recorded row on any node to the last, seconds.
    fn recorded_span_seconds(&self) -> Option<f64> {
        let a = self
            .recs
            .iter()
            .filter_map(|r| r.job_rows.first())
            .map(|x| x.t_unix_ms)
            .min();
        let b = self
            .recs
            .iter()
            .filter_map(|r| r.job_rows.last())
            .map(|x| x.t_unix_ms)
            .max();
        a.zip(b).map(|(a, b)| (b - a) as f64 / 1000.0)
    }

    /// sacct's record still says running (and may be stale):
    /// [`JobAccounting::is_open`](sacct::JobAccounting::is_open).
    fn sacct_open(&self) -> bool {
        self.acct.is_some_and(|a| a.is_open())
    }

    /// sacct says running although every recorded step has ended: a lost end record.
    fn sacct_record_open(&self) -> bool {
        self.sacct_open()
            && self.primary.is_some_and(|r| {
                !r.steps.is_empty() && r.steps.iter().all(|s| s.ended_unix_ms.is_some())
            })
    }

    /// The recording's span while sacct's record is open (its elapsed grows with the clock),
    /// else sacct's elapsed, else the recording's.
    fn elapsed_seconds(&self, rec_span: Option<f64>) -> Option<f64> {
        if self.sacct_open() && rec_span.is_some() {
            rec_span
        } else {
            self.job_line
                .and_then(|j| j.elapsed_seconds)
                .map(|e| e as f64)
                .or(rec_span)
        }
    }

    fn job_info(&self) -> JobInfo {
        let (recs, primary, job_line) = (self.recs, self.primary, self.job_line);
        // slurmdbd's partial record (sacct::JobAccounting::is_partial) says name `allocation`,
        // UID 0, no partition and no limit: placeholders, not the job's; unknown until it is
        // filled in.
        let whole = job_line.filter(|_| !self.acct.is_some_and(|a| a.is_partial()));
        JobInfo {
            name: whole.map(|j| j.job_name.clone()),
            user: job_line
                .and_then(|j| j.user.clone())
                .or(primary.map(|r| r.meta.user.clone())),
            // The recording's uid first: it is the job's own, whatever sacct holds so far.
            uid: primary.map(|r| r.meta.uid).or(whole.and_then(|j| j.uid)),
            partition: whole.and_then(|j| j.partition.clone()),
            nodes: job_line.and_then(|j| j.nodes),
            node_list: job_line.and_then(|j| j.node_list.clone()).or_else(|| {
                (!recs.is_empty()).then(|| {
                    let mut names: Vec<String> = recs.iter().map(|r| r.meta.node.clone()).collect();
                    names.sort();
                    crate::slurm::hostlist::compress(&names)
                })
            }),
            submit_unix: job_line.and_then(|j| j.submit_unix),
            start_unix: job_line.and_then(|j| j.start_unix),
            end_unix: job_line.and_then(|j| j.end_unix),
            queue_wait_seconds: self.acct.and_then(|a| a.queue_wait_seconds()),
            timelimit_seconds: whole.and_then(|j| j.timelimit_minutes).map(|m| m * 60),
            cancelled_by_uid: job_line.and_then(|j| j.state.cancelled_by_uid),
            work_dir: job_line.and_then(|j| j.work_dir.clone()),
        }
    }

    fn tres_info(&self) -> TresInfo {
        let job_line = self.job_line;
        TresInfo {
            requested: job_line.map(|j| j.req_tres.clone()),
            allocated: job_line.map(|j| j.alloc_tres.clone()),
            req_mem: job_line.and_then(|j| j.req_mem),
            req_mem_whole_node: job_line
                .and_then(|j| j.req_mem)
                .is_some_and(|m| m.is_whole_node()),
            memory_per_node_bytes: job_line.and_then(|j| j.memory_per_node_bytes()),
            gpus_allocated: job_line.and_then(|j| j.gpus_allocated()),
        }
    }

    /// The recording's (merged summary, then the file's note), else sacct's CPU count.
    fn cores_allocated(&self) -> Option<f64> {
        self.merged
            .and_then(|s| s.cores_allocated)
            .or(self.primary.and_then(|r| r.meta.cores_allocated))
            .map(f64::from)
            .or(self.job_line.and_then(|j| j.cpus).map(|c| c as f64))
    }

    /// The job's CPU seconds with their basis: the recordings', else sacct's.
    fn cpu_seconds(&self) -> Option<analysis::efficiency::Sourced<f64>> {
        self.merged
            .and_then(|s| s.cpu_usage_seconds_total)
            .map(|c| {
                analysis::efficiency::Sourced::new(
                    c,
                    if self.recs.len() > 1 {
                        "recordings, summed over the nodes"
                    } else {
                        "recording"
                    },
                )
            })
            .or_else(|| {
                self.acct
                    .and_then(|a| a.cpu_seconds())
                    .map(|(c, b)| analysis::efficiency::Sourced::new(c, b.describe()))
            })
    }

    fn cpu_info(
        &self,
        cpu_total: Option<f64>,
        rec_span: Option<f64>,
        elapsed: Option<f64>,
    ) -> CpuInfo {
        let (merged, acct, recs) = (self.merged, self.acct, self.recs);
        CpuInfo {
            usage_seconds_total: cpu_total,
            user_seconds: merged
                .and_then(|s| s.cpu_user_seconds)
                .or_else(|| acct?.steps_sum(|s| s.user_cpu_seconds)),
            system_seconds: merged
                .and_then(|s| s.cpu_system_seconds)
                .or_else(|| acct?.steps_sum(|s| s.system_cpu_seconds)),
            cores_allocated: self.cores_allocated(),
            peak_effective_cores: merged.and_then(|s| s.peak_effective_cores),
            peak_effective_cores_at_unix_ms: merged.and_then(|s| s.peak_effective_cores_t_unix_ms),
            // Over the recording: the CPU burnt since its first reading (a counter that started
            // before it would otherwise inflate the average); the total is the summary's, which
            // carries the CPU across counter resets. Without a recording, sacct's over elapsed.
            average_effective_cores: match (
                merged.and_then(|s| s.cpu_usage_seconds_total),
                first_cpu_seconds(recs),
                rec_span,
            ) {
                (Some(total), Some(first), Some(span)) if span > 0.0 && total >= first => {
                    Some((total - first) / span)
                }
                _ => match (cpu_total, elapsed) {
                    (Some(c), Some(e)) if recs.is_empty() && e > 0.0 => Some(c / e),
                    _ => None,
                },
            },
        }
    }

    /// The cgroup's limit, else the allocation the plugin noted, else sacct's per node.
    fn memory_limit_bytes(&self) -> Option<u64> {
        self.merged
            .and_then(|s| s.memory_limit_bytes)
            .or(self.primary.and_then(|r| r.meta.memory_allocated_bytes))
            .or(self.job_line.and_then(|j| j.memory_per_node_bytes()))
    }

    /// Memory figures; a kill dated by the first limit hit is said in `notes`.
    fn memory_info(&self, notes: &mut Vec<String>) -> MemoryInfo {
        let (merged, acct) = (self.merged, self.acct);
        let oom_state = self
            .job_line
            .is_some_and(|j| j.state.name == "OUT_OF_MEMORY");
        let sacct_memory = acct.and_then(|a| a.memory_per_node());
        let mut oom_events = merged.map(|s| s.oom_events.clone()).unwrap_or_default();
        if oom_events.is_empty() && oom_state {
            // Slurm saw the kill, the counter we read did not (cgroup v1 counts it in a child):
            // the first time the limit was hit dates it.
            if let Some(e) = merged.and_then(|s| s.limit_hit_events.first()) {
                oom_events.push(e.clone());
                notes.push("The kill is dated by the first time the job hit its memory limit (the kernel counted the kill in a cgroup below the one recorded).".into());
            }
        }
        let oom_kills = match (merged.and_then(|s| s.oom_kills), oom_state) {
            (Some(k), true) => Some(k.max(1)),
            (None, true) => Some(1),
            (k, false) => k,
        };
        MemoryInfo {
            peak_working_set_bytes: merged.and_then(|s| s.peak_working_set_bytes),
            peak_working_set_at_unix_ms: merged.and_then(|s| s.peak_working_set_t_unix_ms),
            peak_working_set_node: self
                .recs
                .iter()
                .filter(|r| r.summary.peak_working_set_bytes.is_some())
                .max_by_key(|r| r.summary.peak_working_set_bytes)
                .map(|r| r.meta.node.clone()),
            lifetime_peak_bytes: merged.and_then(|s| s.lifetime_peak_bytes),
            limit_bytes: self.memory_limit_bytes(),
            oom_kills,
            oom_events,
            sacct_max_rss_bytes: acct.and_then(|a| a.max_rss_bytes()),
            sacct_memory_per_node_bytes: sacct_memory.map(|m| m.bytes_per_node),
            sacct_memory_basis: sacct_memory.map(|m| m.basis.describe()),
            major_faults: merged.and_then(|s| s.memory_major_faults),
        }
    }

    /// What the limit figure is: the cgroup's, the allocation the plugin noted, or sacct's.
    fn limit_source(&self) -> &'static str {
        if self.merged.and_then(|s| s.memory_limit_bytes).is_some() {
            "cgroup limit"
        } else if self
            .primary
            .and_then(|r| r.meta.memory_allocated_bytes)
            .is_some()
        {
            "allocation per node"
        } else if self
            .job_line
            .and_then(|j| j.memory_per_node_bytes())
            .is_some()
        {
            "sacct allocation per node"
        } else {
            "limit"
        }
    }

    /// The efficiencies' inputs from the report's figures: the recording's where there is
    /// one, else sacct's (the sum over a step's tasks, with its basis).
    fn efficiency_inputs(
        &self,
        memory: &MemoryInfo,
        cpu_seconds: Option<analysis::efficiency::Sourced<f64>>,
        elapsed: Option<f64>,
        cores_allocated: Option<f64>,
        gpus: &[GpuSummary],
        gpus_allocated: Option<u64>,
    ) -> analysis::efficiency::Inputs {
        use analysis::efficiency::{GpuInput, Inputs, Sourced};
        let job_line = self.job_line;
        let sacct_memory = self.acct.and_then(|a| a.memory_per_node());
        let memory_used = memory
            .peak_working_set_bytes
            .map(|w| Sourced::new(w, "working-set peak"))
            .or_else(|| sacct_memory.map(|m| Sourced::new(m.bytes_per_node, m.basis.describe())));
        Inputs {
            cpu_seconds,
            elapsed_seconds: elapsed,
            cores_allocated,
            memory_used,
            memory_limit: memory
                .limit_bytes
                .map(|l| Sourced::new(l, self.limit_source())),
            max_rss_bytes: memory.sacct_max_rss_bytes,
            memory_request_bytes: job_line.and_then(|j| j.memory_per_node_bytes()),
            timelimit_seconds: job_line
                .and_then(|j| j.timelimit_minutes)
                .map(|m| m as f64 * 60.0),
            timelimit_unlimited: job_line.is_some_and(|j| {
                j.timelimit_minutes.is_none()
                    && j.fields
                        .get("Timelimit")
                        .is_some_and(|t| t.trim() == "UNLIMITED")
            }),
            timelimit_unknown_reason: job_line
                .is_none()
                .then(|| "no sacct record (the limit is Slurm's)".to_string()),
            gpus: gpus
                .iter()
                .map(|g| GpuInput {
                    label: g.label.clone(),
                    node: g.node.clone(),
                    utilization_percent: g.mean_utilization_percent,
                    memory_used: g
                        .peak_job_memory_bytes
                        .map(|m| Sourced::new(m, "the job's processes, peak")),
                    memory_total_bytes: g.memory_total_bytes,
                })
                .collect(),
            gpus_expected: gpus_allocated,
        }
    }

    /// What the findings and the `#SBATCH` advice read.
    fn facts(
        &self,
        job: &JobInfo,
        cpu: &CpuInfo,
        memory: &MemoryInfo,
        elapsed: Option<f64>,
        gpus: &[GpuSummary],
    ) -> Facts {
        let job_line = self.job_line;
        Facts {
            recorded: self.primary.is_some(),
            state: job_line.map(|j| j.state.name.clone()),
            exit_code: job_line.and_then(|j| j.exit_code).map(|e| e.code),
            exit_signal: job_line.and_then(|j| j.exit_code).map(|e| e.signal),
            owner_uid: job.uid,
            cancelled_by_uid: job.cancelled_by_uid,
            elapsed_seconds: elapsed,
            timelimit_seconds: job.timelimit_seconds.map(|s| s as f64),
            cores_allocated: cpu.cores_allocated,
            cpu_seconds: cpu.usage_seconds_total,
            cpu_system_seconds: cpu.system_seconds,
            peak_effective_cores: cpu.peak_effective_cores,
            memory_limit_bytes: memory.limit_bytes,
            peak_working_set_bytes: memory.peak_working_set_bytes,
            peak_working_set_t_unix_ms: memory.peak_working_set_at_unix_ms,
            lifetime_peak_bytes: memory.lifetime_peak_bytes,
            max_rss_bytes: memory.sacct_max_rss_bytes,
            oom_kills: memory.oom_kills,
            oom_events: memory.oom_events.clone(),
            major_faults: memory.major_faults,
            last_stretch: self
                .primary
                .and_then(|r| last_stretch(&r.job_rows, self.thresholds.idle_min_seconds)),
            sacct_record_open: self.sacct_record_open(),
            gpus: gpus.to_vec(),
            busiest_node: self.busiest_node(),
        }
    }

    /// A multi-node job: the node whose CPU peaked highest, with its allocation and tasks
    /// (what `--cpus-per-task` is sized from).
    fn busiest_node(&self) -> Option<analysis::NodeCores> {
        if self.recs.len() <= 1 {
            return None;
        }
        self.recs
            .iter()
            .filter_map(|r| Some((r, r.summary.peak_effective_cores?)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(r, peak)| analysis::NodeCores {
                node: r.meta.node.clone(),
                peak_effective_cores: peak,
                cores_allocated: r
                    .summary
                    .cores_allocated
                    .or(r.meta.cores_allocated)
                    .map(f64::from),
                tasks: r
                    .steps
                    .iter()
                    .filter(|s| s.step != store::EXTERN_STEP && s.step != "batch")
                    .filter_map(|s| s.tasks)
                    .max(),
            })
    }

    /// The job's findings, and every node of the allocation (recorded or not) with the
    /// findings only a multi-node job has.
    fn findings(&self, facts: &Facts) -> (Vec<Finding>, Vec<nodes::NodeLine>) {
        let mut findings = analysis::findings(facts, self.thresholds);
        let expected: Vec<String> = self
            .job_line
            .and_then(|j| j.node_list.as_deref())
            .and_then(|l| crate::slurm::hostlist::expand(l).ok())
            .filter(|_| !self.recs.is_empty())
            .unwrap_or_default();
        let node_lines = nodes::lines(self.recs, &expected);
        if node_lines.len() > 1 {
            findings.extend(nodes::findings(&node_lines, &nodes::Grid::of(self.recs)));
        }
        (findings, node_lines)
    }

    /// Notes on where the figures came from: a /proc recording, sacct's job-line CPU,
    /// sacct lines that could not be read.
    fn source_notes(&self, notes: &mut Vec<String>) {
        let acct = self.acct;
        if let Some(r) = self.primary {
            if r.meta.source == crate::sample::Source::Proc {
                notes.push("Recorded from /proc (no job cgroup): there is no page-cache figure, kernel peak or limit.".into());
            }
        }
        if self.primary.is_none()
            && acct.and_then(|a| a.cpu_seconds()).map(|(_, b)| b)
                == Some(sacct::CpuBasis::JobLineTotalCpu)
        {
            notes.push(
                "sacct has no step lines for this job: its CPU seconds are the job line's TotalCPU."
                    .into(),
            );
        }
        if acct.is_some_and(|a| a.is_partial()) {
            notes.push(
                "slurmdbd holds only a partial record of this job so far (its end arrived before its start): the job's name, time limit and request are not known yet; run the report again in a minute."
                    .into(),
            );
        }
        if acct.is_some_and(|a| a.skipped_lines > 0) {
            notes.push(format!(
                "{} sacct record(s) could not be read (cut short, or over 1 MiB) and were skipped.",
                acct.map_or(0, |a| a.skipped_lines)
            ));
        }
    }

    /// The report's `source`: `recorded_file`, `slurmdbd_summary` or `sacct_only`.
    fn source(&self) -> &'static str {
        match self.primary.map(|r| r.origin) {
            Some(Origin::File) => "recorded_file",
            Some(Origin::SlurmdbdSummary) => "slurmdbd_summary",
            None => "sacct_only",
        }
    }

    /// One chart line per node, by node name (multi-node jobs only).
    fn node_points(&self, limit: Option<u64>) -> Vec<(String, Vec<Point>)> {
        if self.recs.len() <= 1 {
            return Vec::new();
        }
        let mut v: Vec<(String, Vec<Point>)> = self
            .recs
            .iter()
            .map(|r| (r.meta.node.clone(), points(&r.job_rows, limit)))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Each step's start and end for the charts (the extern step is not the job's work).
    fn step_marks(&self) -> Vec<(String, Option<i64>, Option<i64>)> {
        self.primary
            .map(|r| {
                r.steps
                    .iter()
                    .filter(|s| s.step != store::EXTERN_STEP)
                    .map(|s| (s.step.clone(), s.started_unix_ms, s.ended_unix_ms))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The job-level CPU counter at each node's first readable reading, summed over nodes.
fn first_cpu_seconds(recs: &[NodeRecording]) -> Option<f64> {
    crate::model::sum_all(recs.iter().map(|r| {
        r.job_rows
            .iter()
            .find_map(|x| x.usage.cpu_usage_usec)
            .map(|c| c as f64 / 1e6)
    }))
}

/// The file with the job's steps and job lines: the batch (or interactive) node's, else the
/// first.
fn primary(recs: &[NodeRecording]) -> Option<&NodeRecording> {
    recs.iter()
        .find(|r| {
            r.steps
                .iter()
                .any(|s| crate::store::is_job_series_step(&s.step))
        })
        .or(recs.first())
}

fn step_lines(
    primary: Option<&NodeRecording>,
    acct: Option<&sacct::JobAccounting>,
) -> Vec<StepLine> {
    let mut out: Vec<StepLine> = acct
        .map(|a| {
            a.steps
                .iter()
                .map(|s| StepLine {
                    step: s.step.clone().unwrap_or_default(),
                    state: Some(s.state.name.clone()),
                    exit_code: s.exit_code.map(|e| e.code),
                    exit_signal: s.exit_code.map(|e| e.signal),
                    start_unix: s.start_unix,
                    end_unix: s.end_unix,
                    elapsed_seconds: s.elapsed_seconds,
                    total_cpu_seconds: s.total_cpu_seconds,
                    max_rss_bytes: s.max_rss_bytes,
                    peak_working_set_bytes: None,
                    tasks: s.fields.get("NTasks").and_then(|n| n.parse().ok()),
                    recorded: false,
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(r) = primary {
        for s in &r.steps {
            let fig = r.step_figures.get(&s.step).copied().unwrap_or_default();
            match out.iter_mut().find(|l| l.step == s.step) {
                Some(l) => {
                    l.recorded = true;
                    l.tasks = l.tasks.or(s.tasks);
                    l.total_cpu_seconds = l.total_cpu_seconds.or(fig.cpu_seconds);
                    l.peak_working_set_bytes = fig.peak_working_set_bytes;
                }
                None => {
                    // Wait status → exit code / signal, as sacct would show them.
                    let (code, sig) = match s.exit_status {
                        Some(w) if libc::WIFSIGNALED(w) => (Some(0), Some(libc::WTERMSIG(w))),
                        Some(w) => (Some(libc::WEXITSTATUS(w)), Some(0)),
                        None => (None, None),
                    };
                    out.push(StepLine {
                        step: s.step.clone(),
                        state: None,
                        exit_code: code,
                        exit_signal: sig,
                        start_unix: s.started_unix_ms.map(|t| t / 1000),
                        end_unix: s.ended_unix_ms.map(|t| t / 1000),
                        elapsed_seconds: match (s.started_unix_ms, s.ended_unix_ms) {
                            (Some(a), Some(b)) if b >= a => Some(((b - a) / 1000) as u64),
                            _ => None,
                        },
                        // From the step's own series (sacct not asked or without the step).
                        total_cpu_seconds: fig.cpu_seconds,
                        max_rss_bytes: None,
                        peak_working_set_bytes: fig.peak_working_set_bytes,
                        tasks: s.tasks,
                        recorded: true,
                    })
                }
            }
        }
    }
    out
}

/// (seconds, CPU seconds) over the last `idle_min_seconds` of the job series.
fn last_stretch(rows: &[SampleRow], idle_min_seconds: f64) -> Option<(f64, f64)> {
    let last = rows
        .iter()
        .rev()
        .find(|r| r.usage.cpu_usage_usec.is_some())?;
    let from_t = last.t_unix_ms - (idle_min_seconds * 1000.0) as i64;
    let first = rows
        .iter()
        .find(|r| r.t_unix_ms >= from_t && r.usage.cpu_usage_usec.is_some())?;
    let secs = (last.t_unix_ms - first.t_unix_ms) as f64 / 1000.0;
    let cpu = last
        .usage
        .cpu_usage_usec?
        .checked_sub(first.usage.cpu_usage_usec?)? as f64
        / 1e6;
    (secs > 0.0).then_some((secs, cpu))
}

/// The chart's points: per bucket the largest working set, cache and cores (a peak is never
/// averaged away), the last limit.
pub fn points(rows: &[SampleRow], fallback_limit: Option<u64>) -> Vec<Point> {
    let (Some(a), Some(b)) = (rows.first(), rows.last()) else {
        return Vec::new();
    };
    let span = (b.t_unix_ms - a.t_unix_ms).max(1);
    let n = CHART_POINTS.min(rows.len()).max(1);
    let mut out: Vec<Point> = Vec::with_capacity(n);
    let mut cur_bucket = usize::MAX;
    let mut prev: Option<&SampleRow> = None;
    for r in rows {
        let off = (r.t_unix_ms - a.t_unix_ms).clamp(0, span) as i128;
        let bucket = (off * (n as i128 - 1) / span as i128) as usize;
        let ws = max_o(
            r.usage.memory_working_set_bytes,
            r.memory_working_set_max_bytes,
        );
        let rate = prev.and_then(|p| effective_cores(p, r));
        let cores = max_f(rate, r.effective_cores_max.filter(|c| c.is_finite()));
        let p = Point {
            t_unix_ms: r.t_unix_ms,
            working_set_bytes: ws,
            cache_bytes: r.usage.memory_cache_bytes,
            limit_bytes: r.usage.memory_limit_bytes.or(fallback_limit),
            cores,
        };
        match out.last_mut() {
            Some(last) if bucket == cur_bucket => {
                last.working_set_bytes = max_o(last.working_set_bytes, p.working_set_bytes);
                last.cache_bytes = max_o(last.cache_bytes, p.cache_bytes);
                last.limit_bytes = p.limit_bytes.or(last.limit_bytes);
                last.cores = max_f(last.cores, p.cores);
            }
            _ => {
                cur_bucket = bucket;
                out.push(p);
            }
        }
        prev = Some(r);
    }
    out
}

fn max_o(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

fn max_f(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}
