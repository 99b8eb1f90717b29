//! Rates, percentages and peaks derived from stored samples. Pure functions: no I/O.

use serde::{Deserialize, Serialize};

pub mod between;
pub mod row;

pub use row::{SampleKind, SampleRow, Series};

/// The memory guard turns amber when the working set reaches this share of the limit…
pub const MEMORY_AMBER_PERCENT: f64 = 85.0;
/// …and red at this share: the job is close to an OOM kill.
pub const MEMORY_RED_PERCENT: f64 = 90.0;

/// CPU cores busy on average between two rows: Δ`cpu_usage_usec` / Δt.
///
/// `None` when either reading is unreadable, time did not advance, or the counter went
/// backwards (a reset or a different group): counters only climb, so that is "no rate",
/// never a negative one.
pub fn effective_cores(prev: &SampleRow, cur: &SampleRow) -> Option<f64> {
    cores_between(
        (prev.t_unix_ms, prev.usage.cpu_usage_usec?),
        (cur.t_unix_ms, cur.usage.cpu_usage_usec?),
    )
}

/// The one rate rule: cores busy between two `(t_unix_ms, cumulative CPU µs)` readings;
/// `None` when time does not advance or the counter went backwards.
pub fn cores_between(from: (i64, u64), to: (i64, u64)) -> Option<f64> {
    let dt_ms = to.0.checked_sub(from.0)?;
    if dt_ms <= 0 {
        return None;
    }
    let d_usec = to.1.checked_sub(from.1)?;
    Some(d_usec as f64 / (dt_ms as f64 * 1000.0))
}

/// The sum of figures that must all be known: `None` when any is unreadable (or there are
/// none), so a total over nodes is never a partial sum presented as the whole.
pub fn sum_all<T: Copy + std::iter::Sum<T>>(v: impl IntoIterator<Item = Option<T>>) -> Option<T> {
    let got: Option<Vec<T>> = v.into_iter().collect();
    got.filter(|g| !g.is_empty()).map(|g| g.into_iter().sum())
}

/// The sum of the values that are known (`None` when none is): for figures summed over
/// nodes or cards where some may not have them.
pub fn sum_known(v: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    v.into_iter()
        .flatten()
        .fold(None, |acc, x| Some(acc.unwrap_or(0.0) + x))
}

/// The limit the guard measures against: the cgroup's, else the Slurm allocation.
pub fn memory_limit_bytes(row: &SampleRow, allocated_bytes: Option<u64>) -> Option<u64> {
    row.usage
        .memory_limit_bytes
        .or(allocated_bytes)
        .filter(|&l| l > 0)
}

/// Working set as a percentage of the limit (`allocated_bytes` when the cgroup has none).
pub fn memory_percent_of_limit(row: &SampleRow, allocated_bytes: Option<u64>) -> Option<f64> {
    let ws = row.usage.memory_working_set_bytes?;
    let limit = memory_limit_bytes(row, allocated_bytes)?;
    Some(ws as f64 * 100.0 / limit as f64)
}

/// The one health grade on memory (principle 2), on the working set, never on page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryGuard {
    Ok,
    /// ≥ [`MEMORY_AMBER_PERCENT`] of the limit.
    Amber,
    /// ≥ [`MEMORY_RED_PERCENT`] of the limit.
    Red,
}

impl MemoryGuard {
    pub fn from_percent(percent: f64) -> MemoryGuard {
        if percent >= MEMORY_RED_PERCENT {
            MemoryGuard::Red
        } else if percent >= MEMORY_AMBER_PERCENT {
            MemoryGuard::Amber
        } else {
            MemoryGuard::Ok
        }
    }

    /// `None` when the working set or every limit is unknown: no grade without a figure.
    pub fn of(row: &SampleRow, allocated_bytes: Option<u64>) -> Option<MemoryGuard> {
        memory_percent_of_limit(row, allocated_bytes).map(MemoryGuard::from_percent)
    }
}

/// Peaks and totals over one series, fed row by row in time order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Peaks {
    /// Largest working set: the rows' own readings and their `memory_working_set_max_bytes`.
    pub working_set_max_bytes: Option<u64>,
    /// Time of the row that carried it (a `_max` peak happened at or before this time).
    pub working_set_max_t_unix_ms: Option<i64>,
    /// The kernel's lifetime high-water mark (page cache included), latest-largest.
    pub lifetime_peak_bytes: Option<u64>,
    /// Largest effective cores: the rows' `effective_cores_max` and the rate between rows.
    pub effective_cores_max: Option<f64>,
    /// CPU seconds used: the last readable cumulative counter.
    pub cpu_seconds_total: Option<f64>,
    /// The previous row's time and CPU counter (all a rate needs; a clone of the whole row
    /// cost more than the rest of a week's peaks).
    #[serde(skip)]
    prev: Option<(i64, Option<u64>)>,
}

fn max_opt<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y > x { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

impl Peaks {
    pub fn over<'a>(rows: impl IntoIterator<Item = &'a SampleRow>) -> Peaks {
        let mut p = Peaks::default();
        for r in rows {
            p.add(r);
        }
        p
    }

    pub fn add(&mut self, row: &SampleRow) {
        let ws = max_opt(
            row.usage.memory_working_set_bytes,
            row.memory_working_set_max_bytes,
        );
        if let Some(ws) = ws {
            if !matches!(self.working_set_max_bytes, Some(m) if m >= ws) {
                self.working_set_max_bytes = Some(ws);
                self.working_set_max_t_unix_ms = Some(row.t_unix_ms);
            }
        }
        self.lifetime_peak_bytes = max_opt(
            self.lifetime_peak_bytes,
            row.usage.memory_lifetime_peak_bytes,
        );
        let rate = self.prev.and_then(|(t, cpu)| {
            cores_between((t, cpu?), (row.t_unix_ms, row.usage.cpu_usage_usec?))
        });
        self.effective_cores_max = max_opt(
            self.effective_cores_max,
            max_opt(row.effective_cores_max.filter(|c| c.is_finite()), rate),
        );
        if let Some(usec) = row.usage.cpu_usage_usec {
            self.cpu_seconds_total = Some(usec as f64 / 1e6);
        }
        self.prev = Some((row.t_unix_ms, row.usage.cpu_usage_usec));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SampleKind, Series};

    fn row(t: i64, cpu: Option<u64>) -> SampleRow {
        let mut r = SampleRow::empty(t, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = cpu;
        r
    }

    #[test]
    fn effective_cores_is_delta_cpu_over_delta_t() {
        let c = effective_cores(&row(0, Some(1_000_000)), &row(5_000, Some(11_000_000)));
        assert_eq!(c, Some(2.0));
        assert_eq!(
            effective_cores(&row(0, Some(7)), &row(1_000, Some(7))),
            Some(0.0)
        );
    }

    #[test]
    fn effective_cores_refuses_backwards_none_and_zero_dt() {
        assert_eq!(
            effective_cores(&row(0, Some(10)), &row(5_000, Some(9))),
            None
        );
        assert_eq!(effective_cores(&row(0, None), &row(5_000, Some(9))), None);
        assert_eq!(effective_cores(&row(0, Some(1)), &row(5_000, None)), None);
        assert_eq!(
            effective_cores(&row(5_000, Some(1)), &row(5_000, Some(9))),
            None
        );
        assert_eq!(
            effective_cores(&row(6_000, Some(1)), &row(5_000, Some(9))),
            None
        );
    }

    fn mem(ws: Option<u64>, limit: Option<u64>) -> SampleRow {
        let mut r = row(0, None);
        r.usage.memory_working_set_bytes = ws;
        r.usage.memory_limit_bytes = limit;
        r
    }

    #[test]
    fn memory_percent_uses_cgroup_limit_then_allocation() {
        assert_eq!(
            memory_percent_of_limit(&mem(Some(50), Some(200)), Some(100)),
            Some(25.0)
        );
        assert_eq!(
            memory_percent_of_limit(&mem(Some(50), None), Some(100)),
            Some(50.0)
        );
        assert_eq!(memory_percent_of_limit(&mem(Some(50), None), None), None);
        assert_eq!(memory_percent_of_limit(&mem(None, Some(100)), None), None);
        assert_eq!(memory_percent_of_limit(&mem(Some(50), Some(0)), None), None);
        assert_eq!(
            memory_percent_of_limit(&mem(Some(0), Some(100)), None),
            Some(0.0)
        );
    }

    #[test]
    fn guard_thresholds() {
        assert_eq!(MemoryGuard::from_percent(84.99), MemoryGuard::Ok);
        assert_eq!(
            MemoryGuard::from_percent(MEMORY_AMBER_PERCENT),
            MemoryGuard::Amber
        );
        assert_eq!(MemoryGuard::from_percent(89.99), MemoryGuard::Amber);
        assert_eq!(
            MemoryGuard::from_percent(MEMORY_RED_PERCENT),
            MemoryGuard::Red
        );
        assert_eq!(
            MemoryGuard::of(&mem(Some(95), Some(100)), None),
            Some(MemoryGuard::Red)
        );
        assert_eq!(MemoryGuard::of(&mem(None, Some(100)), None), None);
    }

    #[test]
    fn peaks_keep_between_row_maxima_and_last_cpu_total() {
        let mut a = row(0, Some(0));
        a.usage.memory_working_set_bytes = Some(100);
        a.usage.memory_lifetime_peak_bytes = Some(300);
        let mut b = row(5_000, Some(10_000_000)); // 2 cores between rows
        b.usage.memory_working_set_bytes = Some(90);
        b.memory_working_set_max_bytes = Some(250); // a spike between a and b
        b.effective_cores_max = Some(3.5);
        let mut c = row(10_000, None); // unreadable: totals keep the last reading
        c.usage.memory_working_set_bytes = Some(120);
        let p = Peaks::over([&a, &b, &c]);
        assert_eq!(p.working_set_max_bytes, Some(250));
        assert_eq!(p.working_set_max_t_unix_ms, Some(5_000));
        assert_eq!(p.lifetime_peak_bytes, Some(300));
        assert_eq!(p.effective_cores_max, Some(3.5));
        assert_eq!(p.cpu_seconds_total, Some(10.0));
    }

    #[test]
    fn peaks_use_rate_when_no_max_column_and_stay_none_when_unreadable() {
        let p = Peaks::over([&row(0, Some(0)), &row(1_000, Some(4_000_000))]);
        assert_eq!(p.effective_cores_max, Some(4.0));
        let p = Peaks::over([&row(0, None), &row(1_000, None)]);
        assert_eq!(p.working_set_max_bytes, None);
        assert_eq!(p.lifetime_peak_bytes, None);
        assert_eq!(p.effective_cores_max, None);
        assert_eq!(p.cpu_seconds_total, None);
    }
}
