//! The GPU tables: `gpus` (once per card), `gpu_links` (once per pair of the job's cards),
//! `gpu_samples` (one row per card per stored sample) and the decoded view `gpu_readings`.
//!
//! `gpu_samples` is a plain table (no delta chain): every value column is NULL when the
//! reading failed, and the `errors` column says why, 4 bits per reading in
//! [`GPU_READINGS`] order (bit 4·i): 0 = readable, else a `GpuError` code. A row whose
//! readings all succeeded stores `errors = 0`, which SQLite keeps in the record header
//! alone (no payload byte), so the common case costs one byte.

use rusqlite::{params, Connection, Row};
use std::path::Path;

use super::reader::db_err;
use crate::error::Result;
use crate::sample::{
    GpuCard, GpuError, GpuLink, GpuProcesses, GpuReading, GpuSample, NvlinkCounters,
};

/// The readings of a `GpuSample` in `errors` nibble order, with the view's name for each.
pub const GPU_READINGS: [&str; 12] = [
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
];

pub(crate) fn create_sql() -> String {
    let mut err_cols = Vec::new();
    for (i, name) in GPU_READINGS.iter().enumerate() {
        let mut case = format!("CASE (errors >> {}) & 15", 4 * i);
        for e in GpuError::ALL {
            case.push_str(&format!(" WHEN {} THEN '{}'", e.code(), e.name()));
        }
        case.push_str(" END");
        err_cols.push(format!("    {case} AS {name}_error"));
    }
    format!(
        "CREATE TABLE gpus (
    id                 INTEGER PRIMARY KEY,  -- gpu_samples.gpu
    uuid               TEXT NOT NULL UNIQUE, -- the key: NVML's GPU-… id
    label              TEXT NOT NULL,        -- cuda:N as the job's code sees it (else nvml:N)
    cuda_index         INTEGER,              -- position in the job's CUDA_VISIBLE_DEVICES
    nvml_index         INTEGER NOT NULL,     -- nvidia-smi's index on the node
    pci_bus_id         TEXT,
    name               TEXT,
    memory_total_bytes INTEGER,
    power_limit_watts  REAL,                 -- enforced limit when recording started
    sm_clock_max_mhz   INTEGER,
    nvlink_links       INTEGER,              -- active NVLink links (0: PCIe only)
    step               TEXT NOT NULL,        -- the step that records the card
    first_unix_ms      INTEGER NOT NULL
);
CREATE TABLE gpu_links (
    a            INTEGER NOT NULL,  -- gpus.id
    b            INTEGER NOT NULL,
    level        TEXT NOT NULL,     -- nvlink, or the PCIe common ancestor
    nvlink_links INTEGER NOT NULL,
    PRIMARY KEY (a, b)
);
-- Plain units in the names; NULL = unreadable, and `errors` says why (see gpu_readings).
CREATE TABLE gpu_samples (
    t_ms                       INTEGER NOT NULL,  -- ms since meta.started_unix_ms
    gpu                        INTEGER NOT NULL,  -- gpus.id
    utilization_percent        INTEGER,
    memory_utilization_percent INTEGER,
    memory_used_kib            INTEGER,
    power_draw_milliwatts      INTEGER,
    power_limit_milliwatts     INTEGER,
    temperature_celsius        INTEGER,
    sm_clock_mhz               INTEGER,
    throttle_reasons           INTEGER,           -- nvmlClocksThrottleReasons bits
    energy_millijoules         INTEGER,           -- cumulative since the driver loaded
    job_processes              INTEGER,
    job_memory_kib             INTEGER,
    other_processes            INTEGER,           -- not the job's: never credited to it
    other_memory_kib           INTEGER,
    ecc_uncorrected            INTEGER,           -- volatile count
    nvlink_tx_kib              INTEGER,           -- cumulative, all links
    nvlink_rx_kib              INTEGER,
    errors                     INTEGER NOT NULL   -- 4 bits per reading, see store/gpu.rs
);
CREATE VIEW gpu_readings AS SELECT
    (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'started_unix_ms') + t_ms AS t_unix_ms,
    g.label AS gpu, g.uuid AS uuid,
    utilization_percent, memory_utilization_percent,
    1024 * memory_used_kib AS memory_used_bytes, g.memory_total_bytes AS memory_total_bytes,
    power_draw_milliwatts / 1000.0 AS power_draw_watts,
    power_limit_milliwatts / 1000.0 AS power_limit_watts,
    temperature_celsius, sm_clock_mhz, g.sm_clock_max_mhz AS sm_clock_max_mhz,
    throttle_reasons, energy_millijoules / 1000.0 AS energy_joules,
    job_processes, 1024 * job_memory_kib AS job_memory_bytes,
    other_processes, 1024 * other_memory_kib AS other_memory_bytes,
    ecc_uncorrected, 1024 * nvlink_tx_kib AS nvlink_tx_bytes, 1024 * nvlink_rx_kib AS nvlink_rx_bytes,
{}
FROM gpu_samples JOIN gpus g ON g.id = gpu_samples.gpu;
",
        err_cols.join(",\n")
    )
}

pub(crate) const INSERT_SAMPLE: &str = "INSERT INTO gpu_samples(t_ms, gpu, utilization_percent,
    memory_utilization_percent, memory_used_kib, power_draw_milliwatts, power_limit_milliwatts,
    temperature_celsius, sm_clock_mhz, throttle_reasons, energy_millijoules, job_processes,
    job_memory_kib, other_processes, other_memory_kib, ecc_uncorrected, nvlink_tx_kib,
    nvlink_rx_kib, errors) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,
    ?15, ?16, ?17, ?18, ?19)";

const SELECT_SAMPLE: &str = "SELECT t_ms, gpu, utilization_percent, memory_utilization_percent,
    memory_used_kib, power_draw_milliwatts, power_limit_milliwatts, temperature_celsius,
    sm_clock_mhz, throttle_reasons, energy_millijoules, job_processes, job_memory_kib,
    other_processes, other_memory_kib, ecc_uncorrected, nvlink_tx_kib, nvlink_rx_kib, errors
    FROM gpu_samples";

/// One stored reading of one card.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GpuRow {
    pub t_unix_ms: i64,
    /// `gpus.id` (see [`StoredGpu`]).
    pub gpu: i64,
    pub sample: GpuSample,
}

/// A row of the `gpus` table.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredGpu {
    pub id: i64,
    pub card: GpuCard,
    pub step: String,
    pub first_unix_ms: i64,
}

fn kib(b: u64) -> i64 {
    (b / 1024 + u64::from(b % 1024 >= 512)).min(i64::MAX as u64) as i64
}

fn int(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

/// `GpuSample` → the 16 value columns and the `errors` word.
pub(crate) fn encode(s: &GpuSample) -> ([Option<i64>; 16], i64) {
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
    let u32v = |r: &GpuReading<u32>| r.as_ref().ok().map(|v| i64::from(*v));
    let p = s.processes.as_ref().ok();
    let n = s.nvlink.as_ref().ok();
    let values = [
        u32v(&s.utilization_percent),
        u32v(&s.memory_utilization_percent),
        s.memory_used_bytes.as_ref().ok().map(|b| kib(*b)),
        u32v(&s.power_draw_milliwatts),
        u32v(&s.power_limit_milliwatts),
        u32v(&s.temperature_celsius),
        u32v(&s.sm_clock_mhz),
        s.throttle_reasons.as_ref().ok().map(|v| int(*v)),
        s.energy_millijoules.as_ref().ok().map(|v| int(*v)),
        p.map(|p| i64::from(p.job_processes)),
        p.map(|p| kib(p.job_memory_bytes)),
        p.map(|p| i64::from(p.other_processes)),
        p.map(|p| kib(p.other_memory_bytes)),
        s.ecc_uncorrected.as_ref().ok().map(|v| int(*v)),
        n.map(|n| int(n.tx_kib)),
        n.map(|n| int(n.rx_kib)),
    ];
    (values, errors)
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

fn decode_row(r: &Row<'_>, base: i64) -> rusqlite::Result<GpuRow> {
    let g = |i: usize| r.get::<_, Option<i64>>(i);
    let u32o = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok());
    let u64o = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
    let bytes = |v: Option<i64>| u64o(v).map(|k| k.saturating_mul(1024));
    let errors: i64 = r.get(18)?;
    let procs = match (u32o(g(11)?), bytes(g(12)?), u32o(g(13)?), bytes(g(14)?)) {
        (Some(a), Some(b), Some(c), Some(d)) => Some(GpuProcesses {
            job_processes: a,
            job_memory_bytes: b,
            other_processes: c,
            other_memory_bytes: d,
        }),
        _ => None,
    };
    let nvlink = match (u64o(g(16)?), u64o(g(17)?)) {
        (Some(tx_kib), Some(rx_kib)) => Some(NvlinkCounters { tx_kib, rx_kib }),
        _ => None,
    };
    Ok(GpuRow {
        t_unix_ms: base + r.get::<_, i64>(0)?,
        gpu: r.get(1)?,
        sample: GpuSample {
            utilization_percent: reading(u32o(g(2)?), errors, 0),
            memory_utilization_percent: reading(u32o(g(3)?), errors, 1),
            memory_used_bytes: reading(bytes(g(4)?), errors, 2),
            power_draw_milliwatts: reading(u32o(g(5)?), errors, 3),
            power_limit_milliwatts: reading(u32o(g(6)?), errors, 4),
            temperature_celsius: reading(u32o(g(7)?), errors, 5),
            sm_clock_mhz: reading(u32o(g(8)?), errors, 6),
            throttle_reasons: reading(u64o(g(9)?), errors, 7),
            energy_millijoules: reading(u64o(g(10)?), errors, 8),
            processes: reading(procs, errors, 9),
            ecc_uncorrected: reading(u64o(g(15)?), errors, 10),
            nvlink: reading(nvlink, errors, 11),
        },
    })
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
    base: i64,
    gpu: i64,
    last: Option<u32>,
) -> Result<Vec<GpuRow>> {
    let sql = match last {
        None => format!("{SELECT_SAMPLE} WHERE gpu = ?1 ORDER BY rowid"),
        Some(n) => format!(
            "SELECT * FROM ({SELECT_SAMPLE} WHERE gpu = ?1 ORDER BY rowid DESC LIMIT {n}) ORDER BY t_ms"
        ),
    };
    let mut stmt = conn.prepare(&sql).map_err(|e| db_err(path, e))?;
    let rows = stmt
        .query_map([gpu], |r| decode_row(r, base))
        .and_then(|rows| rows.collect())
        .map_err(|e| db_err(path, e));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_pack_four_bits_per_reading() {
        let mut s = GpuSample::all_failed(GpuError::NotSupported);
        s.utilization_percent = Ok(5);
        s.nvlink = Err(GpuError::GpuIsLost);
        let (v, e) = encode(&s);
        assert_eq!(v[0], Some(5));
        assert_eq!(v[3], None);
        assert_eq!((e >> 44) & 15, i64::from(GpuError::GpuIsLost.code()));
        assert_eq!(e & 15, 0);
        assert_eq!(reading::<u32>(None, e, 3), Err(GpuError::NotSupported));
        assert_eq!(reading::<u32>(None, e, 11), Err(GpuError::GpuIsLost));
    }
}
