//! Maxima between two stored rows of one series: the sampler reads the cgroup more often than
//! it stores a row (fast reads), and a peak seen only between two stored rows must reach the
//! file. The plugin feeds every reading here and takes the maxima into each stored row.

use crate::sample::UsageReading;

use super::cores_between;

/// Running maxima since the last stored row.
#[derive(Debug, Default)]
pub struct BetweenRows {
    working_set_max_bytes: Option<u64>,
    effective_cores_max: Option<f64>,
    /// The previous reading's `(t_unix_ms, cumulative CPU µs)`, for the rate.
    last: Option<(i64, Option<u64>)>,
}

/// What [`BetweenRows::take`] hands to the next stored row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Maxima {
    pub working_set_max_bytes: Option<u64>,
    pub effective_cores_max: Option<f64>,
}

impl BetweenRows {
    /// One reading at `t_unix_ms` (a fast read or a stored row's own).
    pub fn observe(&mut self, t_unix_ms: i64, r: &UsageReading) {
        if let Some(ws) = r.memory_working_set_bytes {
            self.working_set_max_bytes = Some(self.working_set_max_bytes.map_or(ws, |m| m.max(ws)));
        }
        if let (Some((t0, Some(c0))), Some(c1)) = (self.last, r.cpu_usage_usec) {
            if let Some(cores) = cores_between((t0, c0), (t_unix_ms, c1)) {
                self.effective_cores_max = Some(
                    self.effective_cores_max
                        .map_or(cores, |m: f64| m.max(cores)),
                );
            }
        }
        self.last = Some((t_unix_ms, r.cpu_usage_usec));
    }

    /// The largest working set seen since the last stored row (a fast read need not learn a
    /// working set that cannot exceed it).
    pub fn working_set_max_bytes(&self) -> Option<u64> {
        self.working_set_max_bytes
    }

    /// The maxima since the last call; starts the next interval (the rate's last reading is
    /// kept, so the next interval's first rate spans the boundary).
    pub fn take(&mut self) -> Maxima {
        Maxima {
            working_set_max_bytes: self.working_set_max_bytes.take(),
            effective_cores_max: self.effective_cores_max.take(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(ws: Option<u64>, cpu_usec: Option<u64>) -> UsageReading {
        UsageReading {
            memory_working_set_bytes: ws,
            cpu_usage_usec: cpu_usec,
            ..UsageReading::default()
        }
    }

    #[test]
    fn a_peak_between_stored_rows_is_kept_and_then_cleared() {
        let mut b = BetweenRows::default();
        b.observe(0, &reading(Some(100), Some(0)));
        b.observe(1_000, &reading(Some(900), Some(2_000_000))); // 2 cores for a second
        b.observe(2_000, &reading(Some(200), Some(2_500_000))); // 0.5 cores
        let m = b.take();
        assert_eq!(m.working_set_max_bytes, Some(900));
        assert_eq!(m.effective_cores_max, Some(2.0));
        assert_eq!(
            b.take(),
            Maxima {
                working_set_max_bytes: None,
                effective_cores_max: None
            }
        );
        // The next interval's first rate spans the boundary from the last reading.
        b.observe(3_000, &reading(None, Some(3_500_000)));
        assert_eq!(b.take().effective_cores_max, Some(1.0));
    }

    #[test]
    fn a_counter_reset_or_an_unreadable_reading_gives_no_rate() {
        let mut b = BetweenRows::default();
        b.observe(0, &reading(None, Some(5_000_000)));
        b.observe(1_000, &reading(None, Some(1_000))); // went backwards: a new group
        b.observe(2_000, &reading(None, None));
        b.observe(3_000, &reading(None, Some(2_000_000))); // previous unreadable: no rate
        b.observe(3_000, &reading(None, Some(2_100_000))); // no time passed: no rate
        assert_eq!(b.take().effective_cores_max, None);
    }
}
