//! A recorded step's own figures (its CPU total and working-set peak) from the step's series:
//! what a report shows per step without sacct, and what a stored summary keeps of each step.

use serde::{Deserialize, Serialize};

use crate::model::SampleRow;

/// A recorded step's CPU total and working-set peak, from the step's own series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StepFigures {
    pub cpu_seconds: Option<f64>,
    pub peak_working_set_bytes: Option<u64>,
}

impl StepFigures {
    pub fn from_rows(rows: &[SampleRow]) -> StepFigures {
        StepFigures {
            cpu_seconds: rows
                .iter()
                .filter_map(|r| r.usage.cpu_usage_usec)
                .max()
                .map(|u| u as f64 / 1e6),
            peak_working_set_bytes: rows
                .iter()
                .filter_map(|r| {
                    match (
                        r.memory_working_set_max_bytes,
                        r.usage.memory_working_set_bytes,
                    ) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    }
                })
                .max(),
        }
    }
}
