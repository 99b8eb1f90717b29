//! Time with no kernel running, from NVML's ring of GPU-utilization samples
//! (`nvmlDeviceGetSamples`, `NVML_GPU_UTILIZATION_SAMPLES`).
//!
//! Each sample is the whole percent of its sample period (the time since the previous
//! sample: about 1/6 s on recent cards, up to 1 s on older ones) during which a kernel ran,
//! stamped with the period's end in µs. A period counts as idle when its sample is 0.
//! How exact: to one sample period, and to NVML's rounding. A period busy for part of its
//! length counts as busy, and NVML may round a period busy under 1 % down to 0, which
//! counts as idle. "Idle" here means no kernel running: a process may still hold memory.
//! The ring holds a bounded number of samples (about 20 s): if reads are further apart,
//! the gap is not guessed but left out of `covered_us`, so `no_work_us` is then a lower
//! bound and `covered_us` says how much of the interval the samples account for.

use nvml_wrapper::enum_wrappers::device::Sampling;
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Device;

use crate::collect::gpu::gpu_error;
use crate::sample::GpuReading;

pub use crate::sample::IdleTime;

/// A gap between samples longer than this many periods is samples lost, not one period.
const GAP_PERIODS: u64 = 2;

#[derive(Debug)]
pub(super) struct IdleCursor {
    /// The newest sample's timestamp (µs) counted so far, or the start of counting.
    last_us: u64,
    /// The sample period, the shortest interval between consecutive samples seen.
    period_us: Option<u64>,
}

impl IdleCursor {
    pub(super) fn new(since_unix_us: u64) -> IdleCursor {
        IdleCursor {
            last_us: since_unix_us,
            period_us: None,
        }
    }

    pub(super) fn read(&mut self, dev: &Device) -> GpuReading<IdleTime> {
        let samples = match dev.samples(Sampling::GpuUtilization, self.last_us) {
            Ok(s) => s,
            // No sample newer than the last one counted: an empty interval.
            Err(NvmlError::NotFound) => return Ok(IdleTime::default()),
            Err(e) => return Err(gpu_error(&e)),
        };
        let mut points: Vec<(u64, bool)> = samples
            .iter()
            .filter(|s| s.timestamp > self.last_us)
            .map(|s| (s.timestamp, is_zero(&s.value)))
            .collect();
        points.sort_unstable_by_key(|p| p.0);
        Ok(self.count(&points))
    }

    /// Credits each sample's interval `(previous, this]` to its value; an interval longer
    /// than [`GAP_PERIODS`] periods gets one period (the rest: samples the ring dropped).
    pub(super) fn count(&mut self, points: &[(u64, bool)]) -> IdleTime {
        let shortest = points
            .windows(2)
            .map(|w| w[1].0 - w[0].0)
            .filter(|&d| d > 0)
            .min();
        self.period_us = match (self.period_us, shortest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut t = IdleTime::default();
        for &(ts, idle) in points {
            let mut span = ts.saturating_sub(self.last_us);
            if let Some(p) = self.period_us {
                if span > p * GAP_PERIODS {
                    span = p;
                }
            }
            t.covered_us += span;
            if idle {
                t.no_work_us += span;
            }
            self.last_us = self.last_us.max(ts);
        }
        t
    }
}

fn is_zero(v: &SampleValue) -> bool {
    match *v {
        SampleValue::U32(x) => x == 0,
        SampleValue::U64(x) => x == 0,
        SampleValue::I64(x) => x == 0,
        SampleValue::F64(x) => x == 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_samples_credit_their_periods() {
        let mut c = IdleCursor::new(1000);
        let t = c.count(&[(1100, false), (1200, true), (1300, true), (1400, false)]);
        assert_eq!(
            t,
            IdleTime {
                no_work_us: 200,
                covered_us: 400
            }
        );
        // The next read continues from the newest sample.
        let t = c.count(&[(1500, true)]);
        assert_eq!(
            t,
            IdleTime {
                no_work_us: 100,
                covered_us: 100
            }
        );
    }

    #[test]
    fn samples_the_ring_dropped_are_not_guessed() {
        let mut c = IdleCursor::new(0);
        c.count(&[(100, false), (200, false)]);
        // 10 periods later: only the sample's own period is accounted for.
        let t = c.count(&[(1200, true), (1300, true)]);
        assert_eq!(
            t,
            IdleTime {
                no_work_us: 200,
                covered_us: 200
            }
        );
    }
}
