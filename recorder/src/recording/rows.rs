//! Which series a reading stores. A step writes its own series; one step per node also
//! writes the job series (see `store::claims_job_series`). A periodic step row that equals
//! the job's (the only step running) is not stored, and while several steps run each step's
//! periodic rows are kept every `STEP_ROW_EVERY` intervals only: the job series has the full
//! resolution and the between-row maxima keep every step's peaks. Without this a week-long
//! `srun` inside a batch job tripled the file (25.6 MB at 5 s). Boundary rows (a step's
//! start and end) are always stored.

use crate::model::between::Maxima;
use crate::model::{SampleKind, SampleRow, Series};
use crate::sample::UsageReading;

/// While several steps run, a step's periodic row is stored every this many intervals.
pub const STEP_ROW_EVERY: u32 = 6;

/// The series one reading covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reads {
    pub job: bool,
    pub step: bool,
}

/// The other steps as the writer knows them at the reading's time (`Writer::
/// has_job_series_writer`, `Writer::step_row_wanted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peers {
    /// A batch or interactive step runs: it writes the job series.
    pub job_series_writer_running: bool,
    /// This step's row would differ from the job's (another step runs beside it).
    pub step_row_wanted: bool,
}

/// The step's row schedule: counts the periodic step rows it could have stored.
#[derive(Debug, Clone)]
pub struct RowSchedule {
    records_job_series: bool,
    step_periodic: u32,
}

impl RowSchedule {
    pub fn new(records_job_series: bool) -> RowSchedule {
        RowSchedule {
            records_job_series,
            step_periodic: 0,
        }
    }

    pub fn records_job_series(&self) -> bool {
        self.records_job_series
    }

    /// The series a stored row of `kind` reads and stores.
    pub fn stored(&mut self, kind: SampleKind, peers: Peers) -> Reads {
        let boundary = kind != SampleKind::Periodic;
        let coarse = self.records_job_series || peers.job_series_writer_running;
        let wanted = !self.records_job_series || peers.step_row_wanted;
        let step =
            boundary || (wanted && (!coarse || self.step_periodic.is_multiple_of(STEP_ROW_EVERY)));
        if !boundary && wanted {
            self.step_periodic += 1;
        }
        Reads {
            job: self.records_job_series,
            step,
        }
    }

    /// The series a fast read (between stored rows, maxima only) covers: every series a
    /// stored row may take, so a coarse step row still carries the peaks of its intervals.
    pub fn fast(&self, peers: Peers) -> Reads {
        Reads {
            job: self.records_job_series,
            step: !self.records_job_series || peers.step_row_wanted,
        }
    }
}

/// What the sampler itself has cost so far (its thread's CPU time and bytes written),
/// recorded in every row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplerCost {
    pub cpu_usec: Option<u64>,
    pub bytes_written: Option<u64>,
}

/// A stored row: the reading, the interval's between-row maxima and the sampler's cost.
pub fn stored_row(
    t_unix_ms: i64,
    series: Series,
    kind: SampleKind,
    reading: UsageReading,
    maxima: Maxima,
    cores_allocated: Option<u32>,
    cost: SamplerCost,
) -> SampleRow {
    let mut row = SampleRow::empty(t_unix_ms, series, kind);
    row.usage = reading;
    row.cores_allocated = cores_allocated;
    row.memory_working_set_max_bytes = maxima.working_set_max_bytes;
    row.effective_cores_max = maxima.effective_cores_max;
    row.sampler_cpu_usec = cost.cpu_usec;
    row.sampler_bytes_written = cost.bytes_written;
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALONE: Peers = Peers {
        job_series_writer_running: false,
        step_row_wanted: false,
    };
    const BESIDE_BATCH: Peers = Peers {
        job_series_writer_running: true,
        step_row_wanted: true,
    };

    fn periodic_steps(s: &mut RowSchedule, peers: Peers, n: usize) -> Vec<bool> {
        (0..n)
            .map(|_| s.stored(SampleKind::Periodic, peers).step)
            .collect()
    }

    #[test]
    fn the_batch_step_alone_stores_job_rows_and_only_its_boundary_step_rows() {
        let mut s = RowSchedule::new(true);
        let start = s.stored(SampleKind::Start, ALONE);
        assert_eq!(
            start,
            Reads {
                job: true,
                step: true
            }
        );
        assert_eq!(periodic_steps(&mut s, ALONE, 3), [false, false, false]);
        assert!(s.stored(SampleKind::Periodic, ALONE).job);
        assert_eq!(
            s.stored(SampleKind::End, ALONE),
            Reads {
                job: true,
                step: true
            }
        );
    }

    #[test]
    fn the_batch_step_beside_an_srun_keeps_every_sixth_periodic_step_row() {
        let mut s = RowSchedule::new(true);
        let kept = periodic_steps(&mut s, BESIDE_BATCH, 13);
        let at: Vec<usize> = (0..13).filter(|&i| kept[i]).collect();
        assert_eq!(at, [0, 6, 12]);
    }

    #[test]
    fn an_srun_beside_the_batch_step_is_coarse_and_one_alone_stores_every_row() {
        let mut beside = RowSchedule::new(false);
        let kept = periodic_steps(&mut beside, BESIDE_BATCH, 7);
        assert_eq!(kept, [true, false, false, false, false, false, true]);
        assert!(!beside.stored(SampleKind::Periodic, BESIDE_BATCH).job);
        // No batch step (an srun job): this step's series is the only one, every row.
        let mut alone = RowSchedule::new(false);
        assert_eq!(periodic_steps(&mut alone, ALONE, 7), [true; 7]);
    }

    #[test]
    fn boundary_rows_do_not_move_the_coarse_count() {
        let mut s = RowSchedule::new(false);
        assert!(s.stored(SampleKind::Periodic, BESIDE_BATCH).step); // 0: kept
        assert!(s.stored(SampleKind::Start, BESIDE_BATCH).step);
        let kept = periodic_steps(&mut s, BESIDE_BATCH, 6);
        assert_eq!(kept, [false, false, false, false, false, true]);
    }

    #[test]
    fn fast_reads_cover_every_series_a_stored_row_may_take() {
        let job_writer = RowSchedule::new(true);
        assert_eq!(
            job_writer.fast(ALONE),
            Reads {
                job: true,
                step: false
            }
        );
        assert_eq!(
            job_writer.fast(BESIDE_BATCH),
            Reads {
                job: true,
                step: true
            }
        );
        let srun = RowSchedule::new(false);
        assert_eq!(
            srun.fast(ALONE),
            Reads {
                job: false,
                step: true
            }
        );
    }

    #[test]
    fn a_stored_row_carries_the_maxima_and_the_samplers_cost() {
        let reading = UsageReading {
            memory_working_set_bytes: Some(300),
            cpu_usage_usec: Some(9_000_000),
            ..UsageReading::default()
        };
        let maxima = Maxima {
            working_set_max_bytes: Some(900),
            effective_cores_max: Some(3.5),
        };
        let cost = SamplerCost {
            cpu_usec: Some(1_200),
            bytes_written: Some(40_960),
        };
        let row = stored_row(
            7_000,
            Series::step("0"),
            SampleKind::Periodic,
            reading.clone(),
            maxima,
            Some(8),
            cost,
        );
        assert_eq!(row.t_unix_ms, 7_000);
        assert_eq!(row.series, Series::step("0"));
        assert_eq!(row.usage, reading);
        assert_eq!(row.cores_allocated, Some(8));
        assert_eq!(row.memory_working_set_max_bytes, Some(900));
        assert_eq!(row.effective_cores_max, Some(3.5));
        assert_eq!(row.sampler_cpu_usec, Some(1_200));
        assert_eq!(row.sampler_bytes_written, Some(40_960));
    }
}
