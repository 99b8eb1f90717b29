//! One card's exact ledger over a time window, from its stored rows' cumulative counters:
//! each figure is the difference of a counter at the window's first and last rows, so it
//! is exact to the stored unit (ms) however far apart the rows are. Nothing is estimated:
//! a counter unreadable at either end, or one that went backwards (the driver reloaded),
//! is `None`.

use serde::Serialize;

use crate::sample::{Gpm, GpmUnavailable, GPU_LIMITERS};
use crate::store::GpuRow;

/// A card's time over a window, between its first and last stored rows in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardLedger {
    /// The rows at the window's ends: the figures cover exactly this span.
    pub from_unix_ms: i64,
    pub to_unix_ms: i64,
    /// Per limiter (`sample::GPU_LIMITER_NAMES` order): seconds it held the clocks down.
    pub limiter_seconds: [Option<f64>; GPU_LIMITERS],
    /// Seconds with no kernel running, and the seconds the utilization samples accounted
    /// for (less than the span when NVML's sample ring overran between two rows).
    pub no_work_seconds: Option<f64>,
    pub no_work_covered_seconds: Option<f64>,
    pub energy_joules: Option<f64>,
    /// GPM's time-weighted means over the rows' intervals that had them.
    pub gpm: Option<Gpm>,
    /// Why there are no GPM means (the last row's reason), when there are none.
    pub gpm_unavailable: Option<GpmUnavailable>,
}

/// The ledger of `rows` (one card's, oldest first) between `from_unix_ms` and
/// `to_unix_ms` (inclusive). `None` with fewer than two rows in the window.
pub fn card_ledger(rows: &[GpuRow], from_unix_ms: i64, to_unix_ms: i64) -> Option<CardLedger> {
    let inside: Vec<&GpuRow> = rows
        .iter()
        .filter(|r| (from_unix_ms..=to_unix_ms).contains(&r.t_unix_ms))
        .collect();
    let (first, last) = match inside.as_slice() {
        [first, .., last] => (*first, *last),
        _ => return None,
    };
    let diff = |a: Option<u64>, b: Option<u64>| b?.checked_sub(a?);
    let seconds = |a: Option<u64>, b: Option<u64>| diff(a, b).map(|ms| ms as f64 / 1000.0);
    let (a, b) = (&first.totals, &last.totals);
    let energy = diff(
        first.sample.energy_millijoules.ok(),
        last.sample.energy_millijoules.ok(),
    );
    let (gpm, gpm_unavailable) = gpm_means(&inside);
    Some(CardLedger {
        from_unix_ms: first.t_unix_ms,
        to_unix_ms: last.t_unix_ms,
        limiter_seconds: std::array::from_fn(|k| seconds(a.violation_ms[k], b.violation_ms[k])),
        no_work_seconds: seconds(a.no_work_ms, b.no_work_ms),
        no_work_covered_seconds: seconds(a.no_work_covered_ms, b.no_work_covered_ms),
        energy_joules: energy.map(|mj| mj as f64 / 1000.0),
        gpm,
        gpm_unavailable,
    })
}

/// Each row after the first holds GPM over the interval since the row before: weight it by
/// that interval. A metric no row had stays `None`.
fn gpm_means(rows: &[&GpuRow]) -> (Option<Gpm>, Option<GpmUnavailable>) {
    let mut sums = [(0.0f64, 0.0f64); 4];
    let mut why = None;
    let mut any = false;
    for w in rows.windows(2) {
        let dt = (w[1].t_unix_ms - w[0].t_unix_ms) as f64;
        match &w[1].sample.ledger.gpm {
            Ok(g) => {
                any = true;
                let m = [
                    g.sm_active_percent,
                    g.sm_occupancy_percent,
                    g.tensor_active_percent,
                    g.dram_bw_util_percent,
                ];
                for (s, v) in sums.iter_mut().zip(m) {
                    if let Some(v) = v {
                        *s = (s.0 + v * dt, s.1 + dt);
                    }
                }
            }
            Err(e) => why = Some(*e),
        }
    }
    if !any {
        return (None, why);
    }
    let mean = |(sum, t): (f64, f64)| (t > 0.0).then(|| sum / t);
    let g = Gpm {
        sm_active_percent: mean(sums[0]),
        sm_occupancy_percent: mean(sums[1]),
        tensor_active_percent: mean(sums[2]),
        dram_bw_util_percent: mean(sums[3]),
    };
    (Some(g), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{GpuError, GpuSample};
    use crate::store::LedgerTotals;

    fn row(t_s: i64, power_ms: Option<u64>, no_work_ms: u64, gpm: Option<f64>) -> GpuRow {
        let mut sample = GpuSample::all_failed(GpuError::NotSupported);
        sample.energy_millijoules = Ok(1_000_000 + t_s as u64 * 300_000);
        sample.ledger.gpm = match gpm {
            Some(p) => Ok(Gpm {
                sm_active_percent: Some(p),
                ..Gpm::default()
            }),
            None => Err(GpmUnavailable::FirstSample),
        };
        let mut totals = LedgerTotals {
            no_work_ms: Some(no_work_ms),
            no_work_covered_ms: Some(t_s as u64 * 1000),
            ..LedgerTotals::default()
        };
        totals.violation_ms[0] = power_ms;
        GpuRow {
            t_unix_ms: t_s * 1000,
            gpu: 1,
            sample,
            totals,
        }
    }

    #[test]
    fn the_window_is_the_difference_at_its_ends() {
        let rows = [
            row(0, Some(0), 0, None),
            row(5, Some(1_250), 0, Some(10.0)),
            row(10, Some(3_000), 2_500, Some(40.0)),
            row(20, Some(3_000), 9_001, Some(70.0)),
        ];
        let l = card_ledger(&rows, 5_000, 20_000).unwrap();
        assert_eq!((l.from_unix_ms, l.to_unix_ms), (5_000, 20_000));
        assert_eq!(l.limiter_seconds[0], Some(1.75));
        assert_eq!(l.limiter_seconds[1], None, "unreadable is None, never 0");
        assert_eq!(l.no_work_seconds, Some(9.001));
        assert_eq!(l.no_work_covered_seconds, Some(15.0));
        assert_eq!(l.energy_joules, Some(4_500.0));
        // 40 % for 5 s, 70 % for 10 s.
        assert_eq!(l.gpm.unwrap().sm_active_percent, Some(60.0));
        assert_eq!(l.gpm.unwrap().tensor_active_percent, None);
    }

    #[test]
    fn unreadable_or_reset_ends_give_none() {
        let rows = [
            row(0, Some(5_000), 0, None),
            row(5, None, 0, None),
            row(10, Some(100), 0, None),
        ];
        let l = card_ledger(&rows, 0, 5_000).unwrap();
        assert_eq!(l.limiter_seconds[0], None);
        assert_eq!(l.gpm, None);
        assert_eq!(l.gpm_unavailable, Some(GpmUnavailable::FirstSample));
        // The driver reloaded: the counter restarted, the difference is not the window's.
        assert_eq!(
            card_ledger(&rows, 0, 10_000).unwrap().limiter_seconds[0],
            None
        );
        assert_eq!(card_ledger(&rows, 1, 6_000), None, "one row is no window");
    }
}
