//! The GPU tables: `gpus` (once per card), `gpu_links` (once per pair of the job's cards),
//! `gpu_samples` (one row per card per stored sample), `gpu_rare` (the ledger's seldom-changing
//! columns, for some of those rows), `gpu_xid` (one row per critical Xid event) and the
//! decoded view `gpu_readings`.
//!
//! `gpu_samples` is packed the way schema 1's `samples_packed` was (see `schema`):
//! - `t_ms` and every value column hold the *difference from the same column's previous
//!   non-NULL value of the same card* (the card's first row: the value itself; `t_ms` counts
//!   from `meta.started_unix_ms`). Cumulative counters (energy, NVLink) and slow gauges
//!   (memory, power limit, clocks at a steady state) then cost 0–3 bytes instead of 4–6.
//!   Each card has a single writer (the step that registered it), so its chain is simple:
//!   `value = SUM(column) OVER (PARTITION BY gpu ORDER BY rowid)` where the cell is not NULL;
//! - memory is stored in MiB (rounded to nearest; nvidia-smi's unit), power in mW, energy in
//!   mJ, NVLink in KiB and PCIe in KB/s: all integers (a REAL always costs 8 bytes);
//! - a value column is NULL when the reading failed, and `errors` says why, 4 bits per
//!   reading in [`GPU_READINGS`] order (bit 4·i): 0 = readable, else a `GpuError` code. A row
//!   whose readings all succeeded stores `errors = 0`, which SQLite keeps in the record
//!   header alone (no payload byte).
//!
//! Schema 3 appended the exact ledger's columns (violation time per limiter, cumulative
//! no-work time, GPM) and their own errors word `ledger_errors`: see [`ledger`]. They are
//! packed further (second differences for the busy limiters, the uncovered time for the
//! covered one, the seldom-changing limiters and `ledger_errors` in `gpu_rare`): see
//! `store/gpu/chain.rs`.
//! A schema-1/2 file has the first 19 value columns only; a writer reopening one keeps
//! writing those, and its rows read back with the ledger unreadable (`NOT_SUPPORTED`).
//!
//! The card's constants (memory size, rated SM clock, name, bus id) live in `gpus`.
//! `xid_events` is the number of critical Xid events seen since the card's previous row; their
//! codes are in `gpu_xid`, in the same order as the rows (NVML gives an event no time: it is
//! stamped with the reading that collected it).

mod chain;
mod ddl;
pub mod ledger;

pub(crate) use chain::GpuChain;
pub(crate) use ddl::create_sql;

use rusqlite::{params, Connection, Row};
use std::collections::HashMap;
use std::path::Path;

use super::fault::db_err;
use crate::error::Result;
use crate::sample::{
    GpuCard, GpuError, GpuLedger, GpuLink, GpuProcesses, GpuReading, GpuSample, NvlinkCounters,
};
use ledger::{LedgerTotals, NLEDGER};

/// The readings of a `GpuSample` in `errors` nibble order, with the view's name for each.
pub const GPU_READINGS: [&str; 15] = [
    "utilization",
    "memory_utilization",
    "memory_used",
    "power_draw",
    "power_limit",
    "temperature",
    "sm_clock",
    "throttle_reasons",
    "energy",
    "processes",
    "ecc_uncorrected",
    "nvlink",
    "pcie_tx",
    "pcie_rx",
    "xid",
];
// 15 nibbles fill bits 0..59 of the (signed 64-bit) `errors` word.
const _: () = assert!(GPU_READINGS.len() <= 15);

/// How a stored column becomes the view's plain unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Plain,
    /// MiB → bytes.
    Mib,
    /// KiB → bytes.
    Kib,
    /// Thousandths (mW, mJ, ms) → W, J, s.
    Milli,
    /// Hundredths of a percent → percent.
    Centi,
    /// Not a reading: decoded into the `<reading>_error` columns.
    Errors,
}

/// Value columns of `gpu_samples` in schema 3; schemas 1 and 2 have the first
/// [`NCOLS_BEFORE_3`] (the ledger's columns came with schema 3: see [`ledger`]).
const NCOLS: usize = NCOLS_BEFORE_3 + NLEDGER;
const NCOLS_BEFORE_3: usize = 19;
/// `xid_events`' column.
const XID: usize = 18;
/// Where the ledger's columns start, and its no-work pair.
const LEDGER: usize = NCOLS_BEFORE_3;
const LEDGER_IDLE: usize = LEDGER + crate::sample::GPU_LIMITERS;

/// The schema this code creates (`schema::SCHEMA_VERSION`; importing it would make the two
/// modules depend on each other).
pub(crate) const NEWEST: i64 = 4;

/// How many of [`COLUMNS`] a file of schema `version` has.
const fn ncols_in(version: i64) -> usize {
    if version >= 3 {
        NCOLS
    } else {
        NCOLS_BEFORE_3
    }
}

/// (column in `gpu_samples`, column in `gpu_readings`, unit). Order is the codec's order.
const COLUMNS: [(&str, &str, Unit); NCOLS] = [
    ("utilization_percent", "utilization_percent", Unit::Plain),
    (
        "memory_utilization_percent",
        "memory_utilization_percent",
        Unit::Plain,
    ),
    ("memory_used_mib", "memory_used_bytes", Unit::Mib),
    ("power_draw_milliwatts", "power_draw_watts", Unit::Milli),
    ("power_limit_milliwatts", "power_limit_watts", Unit::Milli),
    ("temperature_celsius", "temperature_celsius", Unit::Plain),
    ("sm_clock_mhz", "sm_clock_mhz", Unit::Plain),
    ("throttle_reasons", "throttle_reasons", Unit::Plain),
    ("energy_millijoules", "energy_joules", Unit::Milli),
    ("job_processes", "job_processes", Unit::Plain),
    ("job_memory_mib", "job_memory_bytes", Unit::Mib),
    ("other_processes", "other_processes", Unit::Plain),
    ("other_memory_mib", "other_memory_bytes", Unit::Mib),
    ("ecc_uncorrected", "ecc_uncorrected", Unit::Plain),
    ("nvlink_tx_kib", "nvlink_tx_bytes", Unit::Kib),
    ("nvlink_rx_kib", "nvlink_rx_bytes", Unit::Kib),
    ("pcie_tx_kib_per_s", "pcie_tx_bytes_per_second", Unit::Kib),
    ("pcie_rx_kib_per_s", "pcie_rx_bytes_per_second", Unit::Kib),
    ("xid_events", "xid_events", Unit::Plain),
    // Schema 3: the exact ledger's counters (store/gpu/ledger.rs).
    ("violation_power_ms", "violation_power_seconds", Unit::Milli),
    (
        "violation_thermal_ms",
        "violation_thermal_seconds",
        Unit::Milli,
    ),
    (
        "violation_sync_boost_ms",
        "violation_sync_boost_seconds",
        Unit::Milli,
    ),
    (
        "violation_board_limit_ms",
        "violation_board_limit_seconds",
        Unit::Milli,
    ),
    (
        "violation_low_utilization_ms",
        "violation_low_utilization_seconds",
        Unit::Milli,
    ),
    (
        "violation_reliability_ms",
        "violation_reliability_seconds",
        Unit::Milli,
    ),
    (
        "violation_total_app_clocks_ms",
        "violation_total_app_clocks_seconds",
        Unit::Milli,
    ),
    (
        "violation_total_base_clocks_ms",
        "violation_total_base_clocks_seconds",
        Unit::Milli,
    ),
    ("no_work_ms", "no_work_seconds", Unit::Milli),
    (
        "no_work_uncovered_ms",
        "no_work_covered_seconds",
        Unit::Milli,
    ),
    (
        "gpm_sm_active_centipercent",
        "gpm_sm_active_percent",
        Unit::Centi,
    ),
    (
        "gpm_sm_occupancy_centipercent",
        "gpm_sm_occupancy_percent",
        Unit::Centi,
    ),
    (
        "gpm_tensor_active_centipercent",
        "gpm_tensor_active_percent",
        Unit::Centi,
    ),
    (
        "gpm_dram_bw_centipercent",
        "gpm_dram_bw_util_percent",
        Unit::Centi,
    ),
    ("ledger_errors", "ledger_errors", Unit::Errors),
];

type Values = [Option<i64>; NCOLS];

/// `INSERT` into `gpu_samples` (`t_ms, gpu, <main columns>, errors`) and, from schema 3,
/// into `gpu_rare` (`id, <rare columns>`).
fn insert_sql(version: i64) -> (String, String) {
    let names = |cols: &[usize]| -> String {
        cols.iter()
            .map(|&i| COLUMNS[i].0)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let marks = |n: usize| -> String {
        (1..=n)
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let main: Vec<usize> = chain::main_columns(version).collect();
    let rare: Vec<usize> = chain::rare_columns(version).collect();
    (
        format!(
            "INSERT INTO gpu_samples(t_ms, gpu, {}, errors) VALUES ({})",
            names(&main),
            marks(main.len() + 3)
        ),
        format!(
            "INSERT INTO gpu_rare(id, {}) VALUES ({})",
            names(&rare),
            marks(rare.len() + 1)
        ),
    )
}

/// One card's stored rows from `rowid >= ?2` on: `t_ms, errors, has a gpu_rare row,
/// <main columns>, <rare columns>`; and the [`COLUMNS`] index of each value read.
fn select_sql(version: i64) -> (String, Vec<usize>) {
    let main = chain::main_columns(version).map(|i| format!("p.{}", COLUMNS[i].0));
    let rare = chain::rare_columns(version).map(|i| format!("r.{}", COLUMNS[i].0));
    let cols: Vec<String> = main.chain(rare).collect();
    let order = chain::main_columns(version)
        .chain(chain::rare_columns(version))
        .collect();
    let (flag, join) = if version >= 3 {
        (
            "r.id IS NOT NULL",
            " LEFT JOIN gpu_rare r ON r.id = p.rowid",
        )
    } else {
        ("0", "")
    };
    let sql = format!(
        "SELECT p.t_ms, p.errors, {flag}, {} FROM gpu_samples p{join}
         WHERE p.gpu = ?1 AND p.rowid >= ?2 ORDER BY p.rowid",
        cols.join(", ")
    );
    (sql, order)
}

/// One stored reading of one card.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GpuRow {
    pub t_unix_ms: i64,
    /// `gpus.id` (see [`StoredGpu`]).
    pub gpu: i64,
    pub sample: GpuSample,
    /// The ledger's cumulative counters at this row (`sample.ledger` has the reading).
    #[serde(default)]
    pub totals: LedgerTotals,
}

/// A row of the `gpus` table.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredGpu {
    pub id: i64,
    pub card: GpuCard,
    pub step: String,
    pub first_unix_ms: i64,
}

const MIB: u64 = 1 << 20;

fn mib(b: u64) -> i64 {
    int(b / MIB + u64::from(b % MIB >= MIB / 2))
}

fn int(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

/// `GpuSample` → the absolute value columns (in [`COLUMNS`] order) and the `errors` word.
pub(crate) fn encode(s: &GpuSample) -> (Values, i64) {
    let mut errors: i64 = 0;
    let mut slot = 0usize;
    let mut e = |r: std::result::Result<(), GpuError>| {
        if let Err(e) = r {
            errors |= i64::from(e.code()) << (4 * slot);
        }
        slot += 1;
    };
    fn okv<T>(r: &GpuReading<T>) -> std::result::Result<(), GpuError> {
        r.as_ref().map(|_| ()).map_err(|e| *e)
    }
    e(okv(&s.utilization_percent));
    e(okv(&s.memory_utilization_percent));
    e(okv(&s.memory_used_bytes));
    e(okv(&s.power_draw_milliwatts));
    e(okv(&s.power_limit_milliwatts));
    e(okv(&s.temperature_celsius));
    e(okv(&s.sm_clock_mhz));
    e(okv(&s.throttle_reasons));
    e(okv(&s.energy_millijoules));
    e(okv(&s.processes));
    e(okv(&s.ecc_uncorrected));
    e(okv(&s.nvlink));
    e(okv(&s.pcie_tx_kib_per_s));
    e(okv(&s.pcie_rx_kib_per_s));
    e(okv(&s.xid_errors));
    let u32v = |r: &GpuReading<u32>| r.as_ref().ok().map(|v| i64::from(*v));
    let p = s.processes.as_ref().ok();
    let n = s.nvlink.as_ref().ok();
    let values = [
        u32v(&s.utilization_percent),
        u32v(&s.memory_utilization_percent),
        s.memory_used_bytes.as_ref().ok().map(|b| mib(*b)),
        u32v(&s.power_draw_milliwatts),
        u32v(&s.power_limit_milliwatts),
        u32v(&s.temperature_celsius),
        u32v(&s.sm_clock_mhz),
        s.throttle_reasons.as_ref().ok().map(|v| int(*v)),
        s.energy_millijoules.as_ref().ok().map(|v| int(*v)),
        p.map(|p| i64::from(p.job_processes)),
        p.map(|p| mib(p.job_memory_bytes)),
        p.map(|p| i64::from(p.other_processes)),
        p.map(|p| mib(p.other_memory_bytes)),
        s.ecc_uncorrected.as_ref().ok().map(|v| int(*v)),
        n.map(|n| int(n.tx_kib)),
        n.map(|n| int(n.rx_kib)),
        u32v(&s.pcie_tx_kib_per_s),
        u32v(&s.pcie_rx_kib_per_s),
        s.xid_errors.as_ref().ok().map(|x| int(x.len() as u64)),
    ];
    let mut all = [None; NCOLS];
    all[..LEDGER].copy_from_slice(&values);
    all[LEDGER..].copy_from_slice(&ledger::encode(&s.ledger));
    (all, errors)
}

fn reading<T>(v: Option<T>, errors: i64, slot: usize) -> GpuReading<T> {
    match v {
        Some(v) => Ok(v),
        None => {
            let code = ((errors >> (4 * slot)) & 15) as u8;
            Err(GpuError::from_code(code).unwrap_or(GpuError::Other))
        }
    }
}

/// Absolute values (and the card's queue of Xid codes) → the reading, less its ledger.
fn decode(v: &Values, errors: i64, xids: &mut std::collections::VecDeque<u64>) -> GpuSample {
    let u32o = |i: usize| v[i].and_then(|v| u32::try_from(v).ok());
    let u64o = |i: usize| v[i].and_then(|v| u64::try_from(v).ok());
    let bytes = |i: usize| u64o(i).map(|m| m.saturating_mul(MIB));
    let procs = match (u32o(9), bytes(10), u32o(11), bytes(12)) {
        (Some(a), Some(b), Some(c), Some(d)) => Some(GpuProcesses {
            job_processes: a,
            job_memory_bytes: b,
            other_processes: c,
            other_memory_bytes: d,
        }),
        _ => None,
    };
    let nvlink = match (u64o(14), u64o(15)) {
        (Some(tx_kib), Some(rx_kib)) => Some(NvlinkCounters { tx_kib, rx_kib }),
        _ => None,
    };
    let xid = u64o(XID).map(|k| {
        let k = (k as usize).min(xids.len());
        xids.drain(..k).collect::<Vec<u64>>()
    });
    GpuSample {
        utilization_percent: reading(u32o(0), errors, 0),
        memory_utilization_percent: reading(u32o(1), errors, 1),
        memory_used_bytes: reading(bytes(2), errors, 2),
        power_draw_milliwatts: reading(u32o(3), errors, 3),
        power_limit_milliwatts: reading(u32o(4), errors, 4),
        temperature_celsius: reading(u32o(5), errors, 5),
        sm_clock_mhz: reading(u32o(6), errors, 6),
        throttle_reasons: reading(u64o(7), errors, 7),
        energy_millijoules: reading(u64o(8), errors, 8),
        processes: reading(procs, errors, 9),
        ecc_uncorrected: reading(u64o(13), errors, 10),
        nvlink: reading(nvlink, errors, 11),
        pcie_tx_kib_per_s: reading(u32o(16), errors, 12),
        pcie_rx_kib_per_s: reading(u32o(17), errors, 13),
        xid_errors: reading(xid, errors, 14),
        ledger: GpuLedger::all_failed(GpuError::NotSupported),
    }
}

/// Per card (`gpus.id`): its delta chain, loaded from the file on first use.
pub(crate) type Chains = HashMap<i64, GpuChain>;

/// Appends buffered readings `(t_unix_ms, gpus.id, reading)` inside the caller's
/// transaction, advancing `chains` (the caller keeps them only if the transaction commits).
pub(crate) fn insert_rows(
    conn: &Connection,
    path: &Path,
    (base, version): (i64, i64),
    chains: &mut Chains,
    rows: &[(i64, i64, GpuSample)],
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let n = ncols_in(version);
    let (insert_sql, rare_sql) = insert_sql(version);
    let mut insert = conn
        .prepare_cached(&insert_sql)
        .map_err(|e| db_err(path, e))?;
    let mut xid = conn
        .prepare_cached("INSERT INTO gpu_xid(t_unix_ms, gpu, xid) VALUES (?1, ?2, ?3)")
        .map_err(|e| db_err(path, e))?;
    for (t, gpu, sample) in rows {
        if let std::collections::hash_map::Entry::Vacant(e) = chains.entry(*gpu) {
            e.insert(chain::load(conn, path, version, *gpu, i64::MAX)?);
        }
        let chain = chains.get_mut(gpu).expect("inserted");
        let (mut abs, errors) = encode(sample);
        // An older file has no ledger columns: the chain must not count what it cannot keep.
        abs[n..].fill(None);
        chain.idle.accumulate(&mut abs[LEDGER..]);
        let (dt, v, rare) = chain.delta(t.wrapping_sub(base), &abs);
        let mut p: Vec<Option<i64>> = Vec::with_capacity(n + 3);
        p.extend([Some(dt), Some(*gpu)]);
        p.extend(chain::main_columns(version).map(|i| v[i]));
        p.push(Some(errors));
        insert
            .execute(rusqlite::params_from_iter(p.iter()))
            .map_err(|e| db_err(path, e))?;
        if rare && version >= 3 {
            let mut p = vec![Some(conn.last_insert_rowid())];
            p.extend(chain::rare_columns(version).map(|i| v[i]));
            conn.prepare_cached(&rare_sql)
                .and_then(|mut s| s.execute(rusqlite::params_from_iter(p.iter())))
                .map_err(|e| db_err(path, e))?;
        }
        for code in sample.xid_errors.iter().flatten() {
            xid.execute(params![t, gpu, int(*code)])
                .map_err(|e| db_err(path, e))?;
        }
    }
    Ok(())
}

/// Inserts (or finds) each card by UUID; returns their ids in `cards` order. The first step
/// to register a card keeps it (one writer per card); `links` are stored once.
pub(crate) fn register(
    conn: &Connection,
    path: &Path,
    step: &str,
    t_unix_ms: i64,
    cards: &[GpuCard],
    links: &[GpuLink],
) -> Result<Vec<(i64, bool)>> {
    let mut out = Vec::new();
    for c in cards {
        let inserted = conn
            .execute(
                "INSERT INTO gpus(uuid, label, cuda_index, nvml_index, pci_bus_id, name,
                   memory_total_bytes, power_limit_watts, sm_clock_max_mhz, nvlink_links, step,
                   first_unix_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT(uuid) DO NOTHING",
                params![
                    c.uuid,
                    c.label(),
                    c.cuda_index,
                    c.nvml_index,
                    c.pci_bus_id,
                    c.name,
                    c.memory_total_bytes.map(int),
                    c.power_limit_watts,
                    c.sm_clock_max_mhz,
                    c.nvlink_links,
                    step,
                    t_unix_ms
                ],
            )
            .map_err(|e| db_err(path, e))?
            == 1;
        let (id, owner): (i64, String) = conn
            .query_row(
                "SELECT id, step FROM gpus WHERE uuid = ?1",
                [&c.uuid],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| db_err(path, e))?;
        out.push((id, inserted || owner == step));
    }
    for l in links {
        let id = |u: &str| cards.iter().position(|c| c.uuid == u).map(|i| out[i].0);
        if let (Some(a), Some(b)) = (id(&l.a_uuid), id(&l.b_uuid)) {
            conn.execute(
                "INSERT OR IGNORE INTO gpu_links(a, b, level, nvlink_links) VALUES (?1, ?2, ?3, ?4)",
                params![a, b, l.level, l.nvlink_links],
            )
            .map_err(|e| db_err(path, e))?;
        }
    }
    Ok(out)
}

pub(crate) fn load_gpus(conn: &Connection, path: &Path) -> Result<Vec<StoredGpu>> {
    let mut stmt = conn
        .prepare(
            "SELECT id, uuid, cuda_index, nvml_index, pci_bus_id, name, memory_total_bytes,
                    power_limit_watts, sm_clock_max_mhz, nvlink_links, step, first_unix_ms
             FROM gpus ORDER BY cuda_index IS NULL, cuda_index, nvml_index",
        )
        .map_err(|e| db_err(path, e))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(StoredGpu {
                id: r.get(0)?,
                card: GpuCard {
                    uuid: r.get(1)?,
                    cuda_index: r.get(2)?,
                    nvml_index: r.get(3)?,
                    pci_bus_id: r.get(4)?,
                    name: r.get(5)?,
                    memory_total_bytes: r
                        .get::<_, Option<i64>>(6)?
                        .and_then(|v| u64::try_from(v).ok()),
                    power_limit_watts: r.get(7)?,
                    sm_clock_max_mhz: r.get(8)?,
                    nvlink_links: r.get(9)?,
                },
                step: r.get(10)?,
                first_unix_ms: r.get(11)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| db_err(path, e));
    rows
}

pub(crate) fn load_links(conn: &Connection, path: &Path) -> Result<Vec<GpuLink>> {
    let mut stmt = conn
        .prepare(
            "SELECT ga.uuid, gb.uuid, l.level, l.nvlink_links FROM gpu_links l
             JOIN gpus ga ON ga.id = l.a JOIN gpus gb ON gb.id = l.b ORDER BY l.a, l.b",
        )
        .map_err(|e| db_err(path, e))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(GpuLink {
                a_uuid: r.get(0)?,
                b_uuid: r.get(1)?,
                level: r.get(2)?,
                nvlink_links: r.get(3)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| db_err(path, e));
    rows
}

/// The rows of one card, oldest first; `last` keeps only the newest N.
pub(crate) fn load_samples(
    conn: &Connection,
    path: &Path,
    (base, version): (i64, i64),
    gpu: i64,
    last: Option<u32>,
) -> Result<Vec<GpuRow>> {
    let e = |e| db_err(path, e);
    let first: i64 = match last {
        None => 0,
        Some(n) => {
            let first: Option<i64> = conn
                .query_row(
                    "SELECT MIN(r) FROM (SELECT rowid AS r FROM gpu_samples WHERE gpu = ?1
                     ORDER BY rowid DESC LIMIT ?2)",
                    params![gpu, n],
                    |r| r.get(0),
                )
                .map_err(e)?;
            match first {
                Some(f) => f,
                None => return Ok(Vec::new()),
            }
        }
    };
    let mut chain = if first > 0 {
        chain::load(conn, path, version, gpu, first)?
    } else {
        GpuChain::default()
    };
    let (sql, order) = select_sql(version);
    let mut stmt = conn.prepare(&sql).map_err(e)?;
    // (t_ms, absolute values, errors, the no-work pair of the card's row before).
    let mut decoded: Vec<(i64, Values, i64, (i64, i64))> = Vec::new();
    let mut q = stmt.query([gpu, first]).map_err(e)?;
    while let Some(r) = q.next().map_err(e)? {
        let row = |r: &Row<'_>| -> rusqlite::Result<(i64, i64, bool, Values)> {
            let mut v: Values = [None; NCOLS];
            for (k, &i) in order.iter().enumerate() {
                v[i] = r.get(k + 3)?;
            }
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, v))
        };
        let (dt, errors, rare, stored) = row(r).map_err(e)?;
        let before = chain.idle_pair();
        let (t, abs) = chain.undelta(dt, &stored, rare);
        decoded.push((t, abs, errors, before));
    }
    // The card's Xid codes in row order: these rows' events are the last ones stored.
    let wanted: usize = decoded
        .iter()
        .filter_map(|(_, v, _, _)| v[XID])
        .map(|k| usize::try_from(k).unwrap_or(0))
        .fold(0, usize::saturating_add); // a damaged count must not overflow
    let mut xids = last_xids(conn, path, gpu, wanted)?;
    Ok(decoded
        .into_iter()
        .map(|(t, v, errors, before)| {
            let mut sample = decode(&v, errors, &mut xids);
            let mut totals = LedgerTotals::default();
            if version >= 3 {
                (sample.ledger, totals) = ledger::decode(&v[LEDGER..], Some(before));
            }
            GpuRow {
                t_unix_ms: base.wrapping_add(t),
                gpu,
                sample,
                totals,
            }
        })
        .collect())
}

/// The last `wanted` Xid codes of card `gpu`, oldest first.
fn last_xids(
    conn: &Connection,
    path: &Path,
    gpu: i64,
    wanted: usize,
) -> Result<std::collections::VecDeque<u64>> {
    if wanted == 0 {
        return Ok(Default::default());
    }
    let e = |e| db_err(path, e);
    let mut s = conn
        .prepare("SELECT xid FROM gpu_xid WHERE gpu = ?1 ORDER BY rowid")
        .map_err(e)?;
    let all: Vec<i64> = s
        .query_map([gpu], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(e)?;
    let skip = all.len().saturating_sub(wanted);
    Ok(all
        .into_iter()
        .skip(skip)
        .map(|x| u64::try_from(x).unwrap_or(0))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_pack_four_bits_per_reading() {
        let mut s = GpuSample::all_failed(GpuError::NotSupported);
        s.utilization_percent = Ok(5);
        s.nvlink = Err(GpuError::GpuIsLost);
        s.xid_errors = Err(GpuError::Timeout);
        let (v, e) = encode(&s);
        assert_eq!(v[0], Some(5));
        assert_eq!(v[3], None);
        assert_eq!((e >> 44) & 15, i64::from(GpuError::GpuIsLost.code()));
        assert_eq!(e & 15, 0);
        assert_eq!(reading::<u32>(None, e, 3), Err(GpuError::NotSupported));
        assert_eq!(reading::<u32>(None, e, 11), Err(GpuError::GpuIsLost));
        assert_eq!(reading::<u32>(None, e, 14), Err(GpuError::Timeout));
        assert!(e > 0, "15 nibbles stay clear of the sign bit");
    }
}
