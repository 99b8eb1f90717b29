//! Schema 3's ledger columns of `gpu_samples` (after the 19 of schemas 1 and 2), see
//! `store/gpu.rs` for the packing they share and `store/gpu/chain.rs` for how the
//! violation counters and the covered time are packed further. The values here:
//!
//! - `violation_<limiter>_ms`: NVML's cumulative violation time per limiter (in
//!   `sample::GPU_LIMITER_NAMES` order), ns rounded to whole ms: the ledger needs no finer,
//!   and a counter that climbs every row costs 2 bytes a row in ms, 3–4 in µs;
//! - `no_work_ms`, covered (stored as `no_work_uncovered_ms`): the card's time with no
//!   kernel running and the time its utilization samples accounted for, *cumulative* from
//!   the card's first row (the reading gives them per interval; the writer adds them up
//!   exactly in µs and keeps the running total rounded to the ms), so any two rows
//!   subtract exactly;
//! - `gpm_<metric>_centipercent`: GPM over the interval since the card's previous row, in
//!   hundredths of a percent;
//! - `ledger_errors`: why each of these is NULL, stored (like the value columns) as the
//!   difference from the card's previous row's word, so an unchanging reason (an Ampere
//!   card's GPM, a limiter the card lacks) costs no byte after the first row. The word:
//!   4 bits per limiter (bits 4·k, k in limiter order), 4 bits for the no-work pair (bits
//!   32..35), each 0 = readable or a `GpuError` code; and 5 bits for GPM (bits 36..40): 0 =
//!   readable, 1–15 a `GpuError` code, 16 = not available on this card (before Hopper),
//!   17 = the card's first reading (GPM needs two).

use crate::sample::{Gpm, GpmUnavailable, GpuError, GpuLedger, GpuReading, IdleTime, GPU_LIMITERS};

/// Ledger columns in `gpu_samples`.
pub(crate) const NLEDGER: usize = GPU_LIMITERS + 2 + 4 + 1;
/// Position of the no-work pair and of the GPM columns among them.
const IDLE: usize = GPU_LIMITERS;
const GPM: usize = GPU_LIMITERS + 2;
/// Position of `ledger_errors` among them.
pub(crate) const ERRORS: usize = NLEDGER - 1;

const GPM_SHIFT: u32 = 36;
const GPM_NOT_THIS_CARD: i64 = 16;
const GPM_FIRST_SAMPLE: i64 = 17;

/// The view's names of the ledger readings whose reasons `ledger_errors` holds: one per
/// limiter, then the no-work pair, then GPM (`<name>_error` in `gpu_readings`).
pub(crate) const LEDGER_READINGS: [&str; GPU_LIMITERS + 2] = [
    "violation_power",
    "violation_thermal",
    "violation_sync_boost",
    "violation_board_limit",
    "violation_low_utilization",
    "violation_reliability",
    "violation_total_app_clocks",
    "violation_total_base_clocks",
    "no_work",
    "gpm",
];

/// Cumulative ledger counters of one stored row, in their stored units. `None`:
/// unreadable at that row (or a schema-1/2 file, which has no ledger).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LedgerTotals {
    /// NVML's violation time per limiter (`sample::GPU_LIMITER_NAMES` order), ms.
    pub violation_ms: [Option<u64>; GPU_LIMITERS],
    /// Time with no kernel running since the card's first row, ms.
    pub no_work_ms: Option<u64>,
    /// Time the utilization samples accounted for since the card's first row, ms.
    pub no_work_covered_ms: Option<u64>,
}

fn ms(ns: u64) -> i64 {
    ((ns / 1_000_000) + u64::from(ns % 1_000_000 >= 500_000)).min(i64::MAX as u64) as i64
}

fn centi(p: Option<f64>) -> Option<i64> {
    p.filter(|p| p.is_finite())
        .map(|p| (p * 100.0).round() as i64)
}

/// The reading → its ledger cells (the no-work pair as this interval's µs: the writer's
/// chain turns them into running totals) and the `ledger_errors` word (absolute).
pub(crate) fn encode(l: &GpuLedger) -> [Option<i64>; NLEDGER] {
    let mut v = [None; NLEDGER];
    let mut errors = 0i64;
    for (k, r) in l.violation_ns.iter().enumerate() {
        match r {
            Ok(ns) => v[k] = Some(ms(*ns)),
            Err(e) => errors |= i64::from(e.code()) << (4 * k),
        }
    }
    match &l.idle {
        Ok(t) => {
            v[IDLE] = Some(t.no_work_us.min(i64::MAX as u64) as i64);
            v[IDLE + 1] = Some(t.covered_us.min(i64::MAX as u64) as i64);
        }
        Err(e) => errors |= i64::from(e.code()) << (4 * IDLE),
    }
    let gpm_code = match &l.gpm {
        Ok(g) => {
            let m = [
                g.sm_active_percent,
                g.sm_occupancy_percent,
                g.tensor_active_percent,
                g.dram_bw_util_percent,
            ];
            for (i, p) in m.into_iter().enumerate() {
                v[GPM + i] = centi(p);
            }
            0
        }
        Err(GpmUnavailable::NotThisCard) => GPM_NOT_THIS_CARD,
        Err(GpmUnavailable::FirstSample) => GPM_FIRST_SAMPLE,
        Err(GpmUnavailable::Error(e)) => i64::from(e.code()),
    };
    v[ERRORS] = Some(errors | gpm_code << GPM_SHIFT);
    v
}

fn reason(errors: i64, slot: usize) -> GpuError {
    GpuError::from_code(((errors >> (4 * slot)) & 15) as u8).unwrap_or(GpuError::Other)
}

/// Absolute cells (cumulative no-work pair, ms) and the previous readable pair → the
/// reading (its no-work time the difference since that pair) and the row's totals.
pub(crate) fn decode(
    v: &[Option<i64>],
    prev_idle: Option<(i64, i64)>,
) -> (GpuLedger, LedgerTotals) {
    let errors = v[ERRORS].unwrap_or(0);
    let u = |i: usize| v[i].and_then(|x| u64::try_from(x).ok());
    let mut totals = LedgerTotals::default();
    let violation_ns: [GpuReading<u64>; GPU_LIMITERS] = std::array::from_fn(|k| {
        totals.violation_ms[k] = u(k);
        u(k).map(|ms| ms.saturating_mul(1_000_000))
            .ok_or_else(|| reason(errors, k))
    });
    totals.no_work_ms = u(IDLE).filter(|_| v[IDLE + 1].is_some());
    totals.no_work_covered_ms = u(IDLE + 1).filter(|_| v[IDLE].is_some());
    let idle = match (v[IDLE], v[IDLE + 1]) {
        (Some(a), Some(b)) => {
            let (pa, pb) = prev_idle.unwrap_or((0, 0));
            Ok(IdleTime {
                no_work_us: u64::try_from(a - pa).unwrap_or(0).saturating_mul(1000),
                covered_us: u64::try_from(b - pb).unwrap_or(0).saturating_mul(1000),
            })
        }
        _ => Err(reason(errors, IDLE)),
    };
    let pct = |i: usize| v[GPM + i].map(|c| c as f64 / 100.0);
    let gpm = match (errors >> GPM_SHIFT) & 31 {
        0 => Ok(Gpm {
            sm_active_percent: pct(0),
            sm_occupancy_percent: pct(1),
            tensor_active_percent: pct(2),
            dram_bw_util_percent: pct(3),
        }),
        GPM_NOT_THIS_CARD => Err(GpmUnavailable::NotThisCard),
        GPM_FIRST_SAMPLE => Err(GpmUnavailable::FirstSample),
        c => Err(GpmUnavailable::Error(
            GpuError::from_code(c as u8).unwrap_or(GpuError::Other),
        )),
    };
    let ledger = GpuLedger {
        violation_ns,
        idle,
        gpm,
    };
    (ledger, totals)
}

/// The card's no-work pair, exact in µs, as the writer adds up each reading's interval.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IdleSum {
    us: [u64; 2],
}

impl IdleSum {
    /// From a file's stored running totals (ms): a reopened writer continues from them.
    pub(crate) fn from_stored(no_work_ms: i64, covered_ms: i64) -> IdleSum {
        let us = |m: i64| u64::try_from(m).unwrap_or(0).saturating_mul(1000);
        IdleSum {
            us: [us(no_work_ms), us(covered_ms)],
        }
    }

    /// Turns the interval cells (µs) of `cells` into running totals (ms, rounded).
    pub(crate) fn accumulate(&mut self, cells: &mut [Option<i64>]) {
        for (i, sum) in self.us.iter_mut().enumerate() {
            if let Some(us) = cells[IDLE + i] {
                *sum = sum.saturating_add(u64::try_from(us).unwrap_or(0));
                cells[IDLE + i] = Some(ms(sum.saturating_mul(1000)));
            }
        }
    }
}

/// The view's `<name>_error` columns for the ledger readings, over `d.ledger_errors`.
pub(crate) fn view_error_columns() -> Vec<String> {
    let names = |case: &mut String| {
        for e in GpuError::ALL {
            case.push_str(&format!(" WHEN {} THEN '{}'", e.code(), e.name()));
        }
    };
    let mut out = Vec::new();
    for (slot, name) in LEDGER_READINGS[..=GPU_LIMITERS].iter().enumerate() {
        let mut case = format!("CASE (d.ledger_errors >> {}) & 15", 4 * slot);
        names(&mut case);
        out.push(format!("    {case} END AS {name}_error"));
    }
    let mut case = format!("CASE (d.ledger_errors >> {GPM_SHIFT}) & 31");
    names(&mut case);
    case.push_str(&format!(
        " WHEN {GPM_NOT_THIS_CARD} THEN 'NOT_AVAILABLE_ON_THIS_CARD' WHEN {GPM_FIRST_SAMPLE} THEN 'FIRST_READING'"
    ));
    out.push(format!("    {case} END AS gpm_error"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::GPU_LIMITER_NAMES;

    #[test]
    fn reading_names_follow_the_limiters() {
        for (k, n) in GPU_LIMITER_NAMES.iter().enumerate() {
            assert_eq!(LEDGER_READINGS[k], format!("violation_{n}"));
        }
    }

    #[test]
    fn unreadable_is_null_with_its_reason_never_0() {
        let mut l = GpuLedger::all_failed(GpuError::NotSupported);
        l.violation_ns[0] = Ok(1_499_999);
        l.violation_ns[7] = Err(GpuError::NoPermission);
        l.gpm = Err(GpmUnavailable::NotThisCard);
        let v = encode(&l);
        assert_eq!(v[0], Some(1));
        assert_eq!(v[1], None);
        let (back, totals) = decode(&v, None);
        assert_eq!(back.violation_ns[0], Ok(1_000_000));
        assert_eq!(back.violation_ns[7], Err(GpuError::NoPermission));
        assert_eq!(back.idle, Err(GpuError::NotSupported));
        assert_eq!(back.gpm, Err(GpmUnavailable::NotThisCard));
        assert_eq!(totals.violation_ms[0], Some(1));
        assert_eq!(totals.no_work_ms, None);
    }

    #[test]
    fn no_work_adds_up_exactly_in_us() {
        let mut sum = IdleSum::default();
        let mut total = 0;
        for _ in 0..1000 {
            let mut cells = [None; NLEDGER];
            cells[IDLE] = Some(1_400); // 1.4 ms: rounding each interval would give 1000 ms
            cells[IDLE + 1] = Some(5_000_000);
            sum.accumulate(&mut cells);
            total = cells[IDLE].unwrap();
        }
        assert_eq!(total, 1_400);
    }
}
