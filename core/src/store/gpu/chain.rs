//! One card's delta chain: how each `gpu_samples` column is packed against the card's
//! previous rows, and the chain's state after a file's rows (a reopened writer continues
//! from it; a reader of the last rows starts from it).
//!
//! Every column skips NULL cells (the chain runs over the card's readable values):
//! - [`Pack::Delta`]: the difference from the previous value;
//! - [`Pack::Delta2`] (the violation counters): the change of that difference. A limiter
//!   holding the clocks at a steady share of each interval, or none, stores 0, which SQLite
//!   keeps in the record header alone; a jittery one costs what a difference did;
//! - [`Pack::Uncovered`] (`no_work_uncovered_ms`): the row's time step minus the covered
//!   time's difference, i.e. the interval the utilization samples did not account for: 0
//!   (no payload byte) when they covered it, instead of the 2 bytes of a ~5000 ms difference.

use rusqlite::Connection;
use std::path::Path;

use super::ledger::IdleSum;
use super::{ncols_in, Values, COLUMNS, LEDGER, LEDGER_IDLE, NCOLS};
use crate::error::Result;
use crate::sample::GPU_LIMITERS;
use crate::store::fault::db_err;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pack {
    Delta,
    Delta2,
    Uncovered,
}

/// How column `i` of [`COLUMNS`] is stored.
pub(super) const fn pack(i: usize) -> Pack {
    if i >= LEDGER && i < LEDGER + GPU_LIMITERS {
        Pack::Delta2
    } else if i == LEDGER_IDLE + 1 {
        Pack::Uncovered
    } else {
        Pack::Delta
    }
}

/// The chain: the last `t_ms`, and per column the last non-NULL absolute value and its
/// difference from the one before (0 before the first).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GpuChain {
    t_ms: i64,
    v: [i64; NCOLS],
    d: [i64; NCOLS],
    /// The card's no-work pair, exact in µs (the columns hold it rounded to the ms).
    pub(super) idle: IdleSum,
}

impl Default for GpuChain {
    fn default() -> GpuChain {
        GpuChain {
            t_ms: 0,
            v: [0; NCOLS],
            d: [0; NCOLS],
            idle: IdleSum::default(),
        }
    }
}

impl GpuChain {
    /// The no-work pair (running totals, ms) of the card's latest row that had it.
    pub(super) fn idle_pair(&self) -> (i64, i64) {
        (self.v[LEDGER_IDLE], self.v[LEDGER_IDLE + 1])
    }

    /// Absolute → stored cells; advances the chain.
    pub(super) fn delta(&mut self, t_ms: i64, abs: &Values) -> (i64, Values) {
        let dt = t_ms.wrapping_sub(self.t_ms);
        self.t_ms = t_ms;
        let mut out = [None; NCOLS];
        for i in 0..NCOLS {
            if let Some(a) = abs[i] {
                let d = a.wrapping_sub(self.v[i]);
                out[i] = Some(match pack(i) {
                    Pack::Delta => d,
                    Pack::Delta2 => d.wrapping_sub(self.d[i]),
                    Pack::Uncovered => dt.wrapping_sub(d),
                });
                (self.v[i], self.d[i]) = (a, d);
            }
        }
        (dt, out)
    }

    /// Stored cells → absolute values; advances the chain.
    pub(super) fn undelta(&mut self, dt: i64, stored: &Values) -> (i64, Values) {
        self.t_ms = self.t_ms.wrapping_add(dt);
        let mut out = [None; NCOLS];
        for i in 0..NCOLS {
            if let Some(c) = stored[i] {
                let d = match pack(i) {
                    Pack::Delta => c,
                    Pack::Delta2 => self.d[i].wrapping_add(c),
                    Pack::Uncovered => dt.wrapping_sub(c),
                };
                self.d[i] = d;
                self.v[i] = self.v[i].wrapping_add(d);
                out[i] = Some(self.v[i]);
            }
        }
        (self.t_ms, out)
    }
}

/// The SQL sum over a card's stored rows that gives column `i`'s last difference
/// (`Delta2`) or last value (the others).
fn first_sum(i: usize) -> String {
    let c = COLUMNS[i].0;
    match pack(i) {
        Pack::Delta | Pack::Delta2 => format!("SUM({c})"),
        Pack::Uncovered => format!("SUM(t_ms - {c})"),
    }
}

/// The chain of card `gpu` after its rows with `rowid < before`: one SUM per column in
/// SQL, and the `Delta2` columns' sums of running sums in one pass here.
pub(super) fn load(
    conn: &Connection,
    path: &Path,
    version: i64,
    gpu: i64,
    before: i64,
) -> Result<GpuChain> {
    let n = ncols_in(version);
    let sums: Vec<String> = (0..n).map(first_sum).collect();
    let sql = format!(
        "SELECT SUM(t_ms), {} FROM gpu_samples WHERE gpu = ?1 AND rowid < ?2",
        sums.join(", ")
    );
    let mut c = conn
        .query_row(&sql, [gpu, before], |r| {
            let mut c = GpuChain {
                t_ms: r.get::<_, Option<i64>>(0)?.unwrap_or(0),
                ..GpuChain::default()
            };
            for i in 0..n {
                let s = r.get::<_, Option<i64>>(i + 1)?.unwrap_or(0);
                match pack(i) {
                    Pack::Delta2 => c.d[i] = s,
                    _ => c.v[i] = s,
                }
            }
            Ok(c)
        })
        .map_err(|e| db_err(path, e))?;
    let twice: Vec<usize> = (0..n).filter(|&i| pack(i) == Pack::Delta2).collect();
    if !twice.is_empty() {
        second_sums(conn, path, (gpu, before), &twice, &mut c.v)?;
    }
    let (no_work, covered) = c.idle_pair();
    c.idle = IdleSum::from_stored(no_work, covered);
    Ok(c)
}

/// Each `Delta2` column's last value: the sum of its running sum over the card's rows.
fn second_sums(
    conn: &Connection,
    path: &Path,
    (gpu, before): (i64, i64),
    cols: &[usize],
    v: &mut [i64; NCOLS],
) -> Result<()> {
    let e = |e| db_err(path, e);
    let names: Vec<&str> = cols.iter().map(|&i| COLUMNS[i].0).collect();
    let sql = format!(
        "SELECT {} FROM gpu_samples WHERE gpu = ?1 AND rowid < ?2 ORDER BY rowid",
        names.join(", ")
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(e)?;
    let mut q = stmt.query([gpu, before]).map_err(e)?;
    let mut run = vec![0i64; cols.len()];
    while let Some(r) = q.next().map_err(e)? {
        for (k, &i) in cols.iter().enumerate() {
            if let Some(x) = r.get::<_, Option<i64>>(k).map_err(e)? {
                run[k] = run[k].wrapping_add(x);
                v[i] = v[i].wrapping_add(run[k]);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_round_trips_nulls_zeros_and_counters() {
        let rows: Vec<(i64, Values)> = vec![
            (0, [Some(7); NCOLS]),
            (5000, [None; NCOLS]),
            (10_000, [Some(0); NCOLS]),
            (15_000, [Some(i64::MAX); NCOLS]),
            (14_000, [Some(3); NCOLS]),
        ];
        let (mut w, mut r) = (GpuChain::default(), GpuChain::default());
        for (t, v) in &rows {
            let (dt, d) = w.delta(*t, v);
            assert_eq!(r.undelta(dt, &d), (*t, *v));
        }
    }

    #[test]
    fn steady_counters_and_covered_intervals_store_0() {
        let mut w = GpuChain::default();
        for k in 0..4i64 {
            let mut abs = [None; NCOLS];
            abs[LEDGER] = Some(100 + 360 * k); // a limiter at a steady share
            abs[LEDGER_IDLE + 1] = Some(5000 * (k + 1)); // samples cover every interval
            let (_, cells) = w.delta(5000 * (k + 1), &abs);
            if k > 0 {
                assert_eq!(cells[LEDGER_IDLE + 1], Some(0));
            }
            if k > 1 {
                assert_eq!(cells[LEDGER], Some(0));
            }
        }
    }
}
