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
//!   (no payload byte) when they covered it, instead of the 2 bytes of a ~5000 ms difference;
//! - [`Pack::Rare`] (the limiters that seldom hold a card back, and `ledger_errors`): a
//!   difference like `Delta`, but in `gpu_rare`, keyed by the `gpu_samples` rowid, which has
//!   a row only where one of them changed or became (un)readable, and for the card's first
//!   row: SQLite spends a header byte on every column of every row, 0 and NULL included,
//!   so 5 columns that do not change cost 5 bytes a row in `gpu_samples`, ~0 here. A row
//!   without a `gpu_rare` row keeps the state of the card's latest one (the same value, or
//!   unreadable), exactly as `samples_rare` does for `samples_packed` (`store/schema.rs`).
//!   The limiters that do climb on a busy card (power, low utilization, the two clock
//!   totals) stay in `gpu_samples`, where a climbing counter costs no extra row.

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
    Rare,
}

/// Limiters (in `sample::GPU_LIMITER_NAMES` order) that live in `gpu_rare`: thermal,
/// sync boost, board limit, reliability.
const RARE_LIMITERS: [usize; 4] = [1, 2, 3, 5];

/// How column `i` of [`COLUMNS`] is stored.
pub(super) const fn pack(i: usize) -> Pack {
    if i == NCOLS - 1 {
        Pack::Rare // ledger_errors
    } else if i >= LEDGER && i < LEDGER + GPU_LIMITERS {
        let k = i - LEDGER;
        if k == RARE_LIMITERS[0]
            || k == RARE_LIMITERS[1]
            || k == RARE_LIMITERS[2]
            || k == RARE_LIMITERS[3]
        {
            Pack::Rare
        } else {
            Pack::Delta2
        }
    } else if i == LEDGER_IDLE + 1 {
        Pack::Uncovered
    } else {
        Pack::Delta
    }
}

/// Columns of [`COLUMNS`] in `gpu_samples` in a file of schema `version`, in table order.
pub(super) fn main_columns(version: i64) -> impl Iterator<Item = usize> {
    (0..ncols_in(version)).filter(|&i| pack(i) != Pack::Rare)
}

/// Columns of [`COLUMNS`] in `gpu_rare` (none before schema 3), in table order.
pub(super) fn rare_columns(version: i64) -> impl Iterator<Item = usize> {
    (0..ncols_in(version)).filter(|&i| pack(i) == Pack::Rare)
}

/// The chain: the last `t_ms`, and per column the last non-NULL absolute value and its
/// difference from the one before (0 before the first); for `Rare` columns whether the
/// card's latest `gpu_rare` row had them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GpuChain {
    t_ms: i64,
    v: [i64; NCOLS],
    d: [i64; NCOLS],
    readable: [bool; NCOLS],
    /// Whether the card has a row: its first row always gets a `gpu_rare` row.
    started: bool,
    /// The card's no-work pair, exact in µs (the columns hold it rounded to the ms).
    pub(super) idle: IdleSum,
}

impl Default for GpuChain {
    fn default() -> GpuChain {
        GpuChain {
            t_ms: 0,
            v: [0; NCOLS],
            d: [0; NCOLS],
            readable: [false; NCOLS],
            started: false,
            idle: IdleSum::default(),
        }
    }
}

impl GpuChain {
    /// The no-work pair (running totals, ms) of the card's latest row that had it.
    pub(super) fn idle_pair(&self) -> (i64, i64) {
        (self.v[LEDGER_IDLE], self.v[LEDGER_IDLE + 1])
    }

    /// Absolute → stored cells, and whether the row needs its `gpu_rare` row (the caller
    /// ignores that for a file without the table); advances the chain.
    pub(super) fn delta(&mut self, t_ms: i64, abs: &Values) -> (i64, Values, bool) {
        let dt = t_ms.wrapping_sub(self.t_ms);
        self.t_ms = t_ms;
        let mut rare = !self.started;
        self.started = true;
        let mut out = [None; NCOLS];
        for i in 0..NCOLS {
            if let Some(a) = abs[i] {
                let d = a.wrapping_sub(self.v[i]);
                out[i] = Some(match pack(i) {
                    Pack::Delta | Pack::Rare => d,
                    Pack::Delta2 => d.wrapping_sub(self.d[i]),
                    Pack::Uncovered => dt.wrapping_sub(d),
                });
                (self.v[i], self.d[i]) = (a, d);
            }
            if pack(i) == Pack::Rare {
                rare |= out[i].is_some_and(|d| d != 0) || abs[i].is_some() != self.readable[i];
                self.readable[i] = abs[i].is_some();
            }
        }
        (dt, out, rare)
    }

    /// Stored cells → absolute values; advances the chain. Without a `gpu_rare` row
    /// (`rare` false) its columns keep their previous state.
    pub(super) fn undelta(&mut self, dt: i64, stored: &Values, rare: bool) -> (i64, Values) {
        self.t_ms = self.t_ms.wrapping_add(dt);
        let mut out = [None; NCOLS];
        for i in 0..NCOLS {
            if pack(i) == Pack::Rare {
                if rare {
                    self.readable[i] = stored[i].is_some();
                    self.v[i] = self.v[i].wrapping_add(stored[i].unwrap_or(0));
                }
                out[i] = self.readable[i].then_some(self.v[i]);
                continue;
            }
            if let Some(c) = stored[i] {
                let d = match pack(i) {
                    Pack::Delta | Pack::Rare => c,
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
        Pack::Delta | Pack::Delta2 | Pack::Rare => format!("SUM({c})"),
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
    let main: Vec<usize> = main_columns(version).collect();
    let sums: Vec<String> = main.iter().map(|&i| first_sum(i)).collect();
    let sql = format!(
        "SELECT count(*), SUM(t_ms), {} FROM gpu_samples WHERE gpu = ?1 AND rowid < ?2",
        sums.join(", ")
    );
    let mut c = conn
        .query_row(&sql, [gpu, before], |r| {
            let mut c = GpuChain {
                started: r.get::<_, i64>(0)? > 0,
                t_ms: r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                ..GpuChain::default()
            };
            for (k, &i) in main.iter().enumerate() {
                let s = r.get::<_, Option<i64>>(k + 2)?.unwrap_or(0);
                match pack(i) {
                    Pack::Delta2 => c.d[i] = s,
                    _ => c.v[i] = s,
                }
            }
            Ok(c)
        })
        .map_err(|e| db_err(path, e))?;
    load_rare(conn, path, version, (gpu, before), &mut c)?;
    let twice: Vec<usize> = main
        .iter()
        .copied()
        .filter(|&i| pack(i) == Pack::Delta2)
        .collect();
    if !twice.is_empty() {
        second_sums(conn, path, (gpu, before), &twice, &mut c.v)?;
    }
    let (no_work, covered) = c.idle_pair();
    c.idle = IdleSum::from_stored(no_work, covered);
    Ok(c)
}

/// The `Rare` columns' state after the card's `gpu_rare` rows with `id < before`: their
/// sums, and which of them the latest such row has.
fn load_rare(
    conn: &Connection,
    path: &Path,
    version: i64,
    (gpu, before): (i64, i64),
    c: &mut GpuChain,
) -> Result<()> {
    let rare: Vec<usize> = rare_columns(version).collect();
    if rare.is_empty() {
        return Ok(());
    }
    let e = |e| db_err(path, e);
    let pick = |f: &dyn Fn(&str) -> String| {
        rare.iter()
            .map(|&i| f(COLUMNS[i].0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let from =
        "FROM gpu_rare r JOIN gpu_samples p ON p.rowid = r.id WHERE p.gpu = ?1 AND r.id < ?2";
    let sums = format!("SELECT {} {from}", pick(&|n| format!("SUM(r.{n})")));
    let last = format!(
        "SELECT {} {from} ORDER BY r.id DESC LIMIT 1",
        pick(&|n| format!("r.{n} IS NOT NULL"))
    );
    conn.query_row(&sums, [gpu, before], |r| {
        for (k, &i) in rare.iter().enumerate() {
            c.v[i] = r.get::<_, Option<i64>>(k)?.unwrap_or(0);
        }
        Ok(())
    })
    .map_err(e)?;
    let mut stmt = conn.prepare(&last).map_err(e)?;
    let mut q = stmt.query([gpu, before]).map_err(e)?;
    if let Some(r) = q.next().map_err(e)? {
        for (k, &i) in rare.iter().enumerate() {
            c.readable[i] = r.get(k).map_err(e)?;
        }
    }
    Ok(())
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
    use crate::store::gpu::NEWEST;

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
            let (dt, d, rare) = w.delta(*t, v);
            assert_eq!(r.undelta(dt, &d, rare), (*t, *v));
        }
    }

    #[test]
    fn a_rare_row_only_where_a_rare_column_changes() {
        let mut w = GpuChain::default();
        let thermal = LEDGER + RARE_LIMITERS[0];
        let mut rows = Vec::new();
        for (k, v) in [Some(0), Some(0), Some(4), Some(4), None, None, Some(4)]
            .into_iter()
            .enumerate()
        {
            let mut abs = [Some(k as i64); NCOLS];
            for i in rare_columns(NEWEST) {
                abs[i] = Some(1);
            }
            abs[thermal] = v;
            rows.push(w.delta(5000 * k as i64, &abs).2);
        }
        assert_eq!(rows, [true, false, true, false, true, false, true]);
    }

    #[test]
    fn steady_counters_and_covered_intervals_store_0() {
        let mut w = GpuChain::default();
        for k in 0..4i64 {
            let mut abs = [None; NCOLS];
            abs[LEDGER] = Some(100 + 360 * k); // a limiter at a steady share
            abs[LEDGER_IDLE + 1] = Some(5000 * (k + 1)); // samples cover every interval
            let (_, cells, _) = w.delta(5000 * (k + 1), &abs);
            if k > 0 {
                assert_eq!(cells[LEDGER_IDLE + 1], Some(0));
            }
            if k > 1 {
                assert_eq!(cells[LEDGER], Some(0));
            }
        }
    }
}
