//! The row types of the pipeline: one reading of a job or step, as collected, stored and
//! analysed. The store encodes them ([`crate::store`]); everything downstream reads them.

use serde::{Deserialize, Serialize};

use crate::sample::UsageReading;

/// Whose usage a row describes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Series {
    /// The job's cgroup as a whole on this node.
    Job,
    /// One step: `"batch"`, `"extern"`, `"0"`, `"1"`, ...
    Step(String),
}

impl Series {
    pub fn step(name: impl Into<String>) -> Series {
        Series::Step(name.into())
    }
}

/// Where a row sits in its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleKind {
    /// The first reading of the series (step or job start).
    Start,
    Periodic,
    /// The last reading (taken in `task_exit`, before Slurm removes the cgroup).
    End,
}

/// One stored reading. Every value is an `Option`: `None` is "unreadable" (SQL NULL), never 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRow {
    pub t_unix_ms: i64,
    pub series: Series,
    pub kind: SampleKind,
    pub usage: UsageReading,
    pub cores_allocated: Option<u32>,
    /// Largest working set seen by the fast reads since the previous *stored* row (this row's
    /// own reading included), so a peak between two stored rows is never lost.
    pub memory_working_set_max_bytes: Option<u64>,
    /// Largest effective cores seen by the fast reads since the previous stored row.
    pub effective_cores_max: Option<f64>,
    /// The sampler's own cumulative CPU time and bytes written to this file: its overhead.
    pub sampler_cpu_usec: Option<u64>,
    pub sampler_bytes_written: Option<u64>,
}

impl SampleRow {
    /// A row with every value unreadable.
    pub fn empty(t_unix_ms: i64, series: Series, kind: SampleKind) -> SampleRow {
        SampleRow {
            t_unix_ms,
            series,
            kind,
            usage: UsageReading::default(),
            cores_allocated: None,
            memory_working_set_max_bytes: None,
            effective_cores_max: None,
            sampler_cpu_usec: None,
            sampler_bytes_written: None,
        }
    }
}
