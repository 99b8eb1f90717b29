//! The per-job SQLite file: schema, writer, reader.
//!
//! One file per job per node, written by the plugin (through [`Writer`]) and read by the
//! epilog and the CLI (through [`Reader`]). The format contract lives in [`schema`].

pub mod access;
pub mod archive;
mod codec;
mod fault;
pub mod gpu;
pub mod harden;
pub mod output;
pub mod paths;
mod private_copy;
mod reader;
pub mod schema;
pub mod summary;
mod writer;

use serde::{Deserialize, Serialize};

use crate::model::SampleKind;
use crate::sample::Source;

pub use gpu::ledger::LedgerTotals;
pub use gpu::{GpuRow, StoredGpu, GPU_READINGS};
pub use harden::Deadline;
pub use output::OutputSize;
pub use reader::{Following, Reader};
pub use schema::{MAX_FILE_BYTES, SCHEMA_VERSION};
pub use writer::Writer;

/// A row's [`SampleKind`] as the file stores it (`samples.kind`).
pub(crate) fn kind_code(kind: SampleKind) -> i64 {
    match kind {
        SampleKind::Periodic => 0,
        SampleKind::Start => 1,
        SampleKind::End => 2,
    }
}

/// The [`SampleKind`] of a stored code; `None` for a code this version does not write.
pub(crate) fn kind_from_code(c: i64) -> Option<SampleKind> {
    match c {
        0 => Some(SampleKind::Periodic),
        1 => Some(SampleKind::Start),
        2 => Some(SampleKind::End),
        _ => None,
    }
}

/// Facts about the job, fixed when the file is created (the `meta` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobMeta {
    pub job_id: u64,
    pub user: String,
    pub uid: u32,
    /// Slurm's node name (`SLURMD_NODENAME`), not the hostname.
    pub node: String,
    pub cluster: Option<String>,
    pub plugin_version: String,
    pub interval_seconds: u32,
    pub source: Source,
    pub cores_allocated: Option<u32>,
    pub memory_allocated_bytes: Option<u64>,
    /// Time base of the file: sample times are stored relative to it.
    pub started_unix_ms: i64,
    /// Tells this job from an earlier one with the same id on this node (see
    /// `collect::job_incarnation`); `None` when it could not be determined.
    pub incarnation: Option<String>,
}

/// One row of the `steps` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepInfo {
    pub step: String,
    pub started_unix_ms: Option<i64>,
    pub ended_unix_ms: Option<i64>,
    pub tasks: Option<u32>,
    pub exit_status: Option<i32>,
}

/// One row of the `events` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub t_unix_ms: i64,
    pub step: Option<String>,
    /// e.g. `step_start`, `step_end`, `oom_kill`, `error`, `rows_dropped`.
    pub kind: String,
    pub detail: String,
}

/// The extern step only holds Slurm's `sleep`; it never makes another step's series distinct.
pub const EXTERN_STEP: &str = "extern";

fn running_at(s: &StepInfo, t: i64) -> bool {
    s.started_unix_ms.is_some_and(|a| a <= t) && !matches!(s.ended_unix_ms, Some(e) if t > e)
}

/// The one rule the writer (to skip) and the reader (to fill) share: a periodic row of `step`
/// at `t` equals the job's row (bar the extern step's idle `sleep`) when `step` is running and
/// is the only non-extern step running at `t`.
pub fn step_row_is_redundant(step: &str, t_unix_ms: i64, steps: &[StepInfo]) -> bool {
    if step == EXTERN_STEP {
        return false;
    }
    let mut me_running = false;
    for s in steps {
        if s.step == step {
            me_running = running_at(s, t_unix_ms);
        } else if s.step != EXTERN_STEP && running_at(s, t_unix_ms) {
            return false;
        }
    }
    me_running
}

/// The steps that always write their node's job series: the batch script's and the
/// interactive step (a job's first step on its node).
pub fn is_job_series_step(step: &str) -> bool {
    matches!(step, "batch" | "interactive")
}

/// Who writes a node's job-level series (one writer per series). The batch or interactive
/// step always does. On a node without one (the other nodes of a multi-node job, and every
/// node of an `salloc` job) the earliest-started step still running when a step starts
/// does, ties broken by name, so that every node's file has its job series. A step that
/// starts while another records it never takes over: in /proc mode each step's job-level
/// total counts only what its own tracker saw, so a hand-over would not be cumulative.
pub fn claims_job_series(step: &str, steps: &[StepInfo]) -> bool {
    if is_job_series_step(step) {
        return true;
    }
    if step == EXTERN_STEP {
        return false;
    }
    let key = |s: &StepInfo| (s.started_unix_ms.unwrap_or(i64::MAX), s.step.clone());
    let Some(me) = steps.iter().find(|s| s.step == step) else {
        return false;
    };
    let mine = key(me);
    !steps.iter().any(|s| {
        s.step != step
            && s.step != EXTERN_STEP
            && s.ended_unix_ms.is_none()
            && (is_job_series_step(&s.step) || key(s) < mine)
    })
}

/// How long after its last step ended a file whose incarnation key differs may still be
/// this job's (see [`continues_the_job`]).
pub const CONTINUATION_WINDOW_MS: i64 = 5 * 60 * 1000;

/// Whether `step`, arriving at an existing file of the same user whose incarnation key
/// differs, is still the same job. The key is the oldest running slurmstepd of the job; with
/// no step running in between (an `salloc` job's sequential steps where there is no extern
/// step: `proctrack/linuxproc` without `PrologFlags=Contain`) it changes within one job. Such
/// a file is this job's when every step in it has ended, the last one at most
/// [`CONTINUATION_WINDOW_MS`] ago, none has this step's name, and this step is not the batch
/// or interactive step (always a job's first step on its node). A job id reused after the
/// controller lost its state fails at least one of these unless it comes within minutes and
/// with new step names — then the earlier job's steps are kept and this one's are added.
pub fn continues_the_job(step: &str, steps: &[StepInfo], now_unix_ms: i64) -> bool {
    if is_job_series_step(step) || steps.iter().any(|s| s.step == step) {
        return false;
    }
    let mut last_end = None;
    for s in steps.iter().filter(|s| s.step != EXTERN_STEP) {
        match s.ended_unix_ms {
            None => return false,
            Some(e) => last_end = Some(last_end.map_or(e, |l: i64| l.max(e))),
        }
    }
    last_end.is_some_and(|e| (0..=CONTINUATION_WINDOW_MS).contains(&(now_unix_ms - e)))
}
