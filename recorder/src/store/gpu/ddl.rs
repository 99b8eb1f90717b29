//! The GPU tables' DDL: `gpus`, `gpu_links`, `gpu_samples` (its columns from [`COLUMNS`]),
//! `gpu_xid` and the decoding view `gpu_readings`. `harden` checks a file's schema against
//! this text, so it must not change for an existing schema version.

use super::chain::{main_columns, pack, rare_columns, Pack};
use super::{Unit, COLUMNS, GPU_READINGS, LEDGER, NEWEST};
use crate::sample::GpuError;

/// Comments for the table's columns (the file is read with `sqlite3` too).
fn column_comment(c: &str) -> &'static str {
    match c {
        "memory_used_mib" => "anyone's, MiB",
        "throttle_reasons" => "nvmlClocksThrottleReasons bits",
        "energy_millijoules" => "cumulative since the driver loaded",
        "other_processes" => "not the job's: never credited to it",
        "ecc_uncorrected" => "volatile count",
        "nvlink_tx_kib" => "cumulative, all links",
        "pcie_tx_kib_per_s" => "NVML's 20 ms window, card -> host",
        "pcie_rx_kib_per_s" => "host -> card",
        "xid_events" => "critical Xid events since the previous row (gpu_xid)",
        "violation_power_ms" => "per limiter: change of the difference (store/gpu/chain.rs)",
        "no_work_ms" => "no kernel running, cumulative from the card's first row",
        "no_work_uncovered_ms" => "t_ms minus the covered time's difference (chain.rs)",
        "gpm_sm_active_centipercent" => "GPM since the previous row, 1/100 %",
        "ledger_errors" => "why a ledger column is NULL, see store/gpu/ledger.rs",
        _ => "",
    }
}

/// The GPU part of the schema: the cards, their wiring, their packed readings, their Xid
/// events, and the `gpu_readings` view that unpacks them. `harden` checks a file's schema
/// against this text, so it must not change for an existing schema version.
pub(crate) fn create_sql() -> String {
    format!(
        "{GPU_CARD_TABLES_SQL}{}{}{GPU_XID_TABLE_SQL}{}",
        gpu_samples_table_sql(),
        gpu_rare_table_sql(),
        gpu_readings_view_sql()
    )
}

/// The cards (one row per UUID) and how each pair is wired.
const GPU_CARD_TABLES_SQL: &str = "CREATE TABLE gpus (
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
";

/// Critical Xid events, stamped with the reading that saw them.
const GPU_XID_TABLE_SQL: &str = "-- Critical Xid events, in the order NVML delivered them; stamped with the reading that saw them.
CREATE TABLE gpu_xid (
    t_unix_ms INTEGER NOT NULL,
    gpu       INTEGER NOT NULL,  -- gpus.id
    xid       INTEGER NOT NULL   -- the Xid code (NVIDIA's Xid catalogue)
);
";

/// A column's declaration, with its comment.
fn declare(i: usize) -> String {
    let c = COLUMNS[i].0;
    match column_comment(c) {
        "" => format!("    {c:<26} INTEGER,"),
        note => format!("    {c:<26} INTEGER,  -- {note}"),
    }
}

/// `gpu_rare`: the rarely changing ledger columns of some `gpu_samples` rows.
fn gpu_rare_table_sql() -> String {
    let mut cols: Vec<String> = rare_columns(NEWEST).map(declare).collect();
    if let Some(last) = cols.last_mut() {
        *last = last
            .replacen(" INTEGER,", " INTEGER ", 1)
            .trim_end()
            .to_string();
    }
    format!(
        "-- The rarely changing ledger columns of some gpu_samples rows (id = its rowid): see
-- store/gpu/chain.rs. A row without one keeps the card's latest state.
CREATE TABLE gpu_rare (
    id                         INTEGER PRIMARY KEY,
{}
);
",
        cols.join("\n")
    )
}

/// `gpu_samples`: one packed row per card per reading, every [`COLUMNS`] column but the
/// `gpu_rare` ones.
fn gpu_samples_table_sql() -> String {
    let table_cols: Vec<String> = main_columns(NEWEST).map(declare).collect();
    format!(
        "-- Packed (differences per card, see store/gpu.rs): read the gpu_readings view instead.
-- NULL = unreadable, and `errors` says why.
CREATE TABLE gpu_samples (
    t_ms                       INTEGER NOT NULL,  -- ms since the card's previous row
    gpu                        INTEGER NOT NULL,  -- gpus.id
{}
    errors                     INTEGER NOT NULL   -- 4 bits per reading, see store/gpu.rs
);
",
        table_cols.join("\n")
    )
}

/// `gpu_readings`: the packed rows (the inner query their differences) summed back into readings in their units, with each
/// unreadable reading's error named.
fn gpu_readings_view_sql() -> String {
    let mut err_cols = Vec::new();
    for (i, name) in GPU_READINGS.iter().enumerate() {
        let mut case = format!("CASE (d.errors >> {}) & 15", 4 * i);
        for e in GpuError::ALL {
            case.push_str(&format!(" WHEN {} THEN '{}'", e.code(), e.name()));
        }
        case.push_str(" END");
        err_cols.push(format!("    {case} AS {name}_error"));
    }
    let sums: Vec<String> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (c, _, _))| match pack(i) {
            // Masked by the card's latest gpu_rare row, `l`.
            Pack::Rare => format!("        SUM({c}) OVER w AS {c}"),
            _ => format!("        CASE WHEN {c} IS NULL THEN NULL ELSE SUM({c}) OVER w END AS {c}"),
        })
        .collect();
    let cols = |names: &[&str]| {
        names
            .iter()
            .map(|n| view_column(n))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ledger: Vec<String> = COLUMNS[LEDGER..]
        .iter()
        .filter(|(_, _, u)| *u != Unit::Errors)
        .map(|(_, v, _)| view_column(v))
        .collect();
    err_cols.extend(super::ledger::view_error_columns());
    format!(
        "CREATE VIEW gpu_readings AS SELECT
    (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'started_unix_ms') + d.t_ms AS t_unix_ms,
    g.label AS gpu, g.uuid AS uuid,
    {}, g.memory_total_bytes AS memory_total_bytes,
    {},
    {}, g.sm_clock_max_mhz AS sm_clock_max_mhz,
    {},
    {},
    CASE WHEN d.xid_events > 0 THEN (SELECT group_concat(x.xid, ',') FROM gpu_xid x
        WHERE x.gpu = d.gpu AND x.t_unix_ms = (SELECT CAST(value AS INTEGER) FROM meta
        WHERE key = 'started_unix_ms') + d.t_ms) END AS xid_codes,
    {},
{}
FROM (SELECT r, gpu, errors, SUM(t_ms) OVER w AS t_ms, MAX(rare_id) OVER w AS rare_id,
{}
      FROM (SELECT s.rowid AS r, s.gpu AS gpu, s.errors AS errors, s.t_ms AS t_ms,
            x.id AS rare_id,
{}
            FROM gpu_samples s LEFT JOIN gpu_rare x ON x.id = s.rowid
            WINDOW w AS (PARTITION BY s.gpu ORDER BY s.rowid ROWS UNBOUNDED PRECEDING))
      WINDOW w AS (PARTITION BY gpu ORDER BY r ROWS UNBOUNDED PRECEDING)) d
JOIN gpus g ON g.id = d.gpu LEFT JOIN gpu_rare l ON l.id = d.rare_id
ORDER BY d.gpu, d.r;
",
        cols(&[
            "utilization_percent",
            "memory_utilization_percent",
            "memory_used_bytes"
        ]),
        cols(&["power_draw_watts", "power_limit_watts"]),
        cols(&["temperature_celsius", "sm_clock_mhz"]),
        cols(&[
            "throttle_reasons",
            "energy_joules",
            "job_processes",
            "job_memory_bytes",
            "other_processes",
            "other_memory_bytes",
            "ecc_uncorrected",
            "nvlink_tx_bytes",
            "nvlink_rx_bytes"
        ]),
        cols(&[
            "pcie_tx_bytes_per_second",
            "pcie_rx_bytes_per_second",
            "xid_events"
        ]),
        ledger.join(",\n    "),
        err_cols.join(",\n"),
        sums.join(",\n"),
        differences().join(",\n")
    )
}

/// Each column's difference from the card's previous value, as the view's inner query
/// unpacks it from the stored cell (see `chain.rs`).
fn differences() -> Vec<String> {
    COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (c, _, _))| match pack(i) {
            Pack::Delta => format!("            s.{c} AS {c}"),
            Pack::Delta2 => format!(
                "            CASE WHEN s.{c} IS NULL THEN NULL ELSE SUM(s.{c}) OVER w END AS {c}"
            ),
            Pack::Uncovered => format!("            s.t_ms - s.{c} AS {c}"),
            Pack::Rare => format!("            x.{c} AS {c}"),
        })
        .collect()
}

/// The view's expression for value column `c` (its view name) in its plain unit.
fn view_column(c: &str) -> String {
    let i = COLUMNS
        .iter()
        .position(|(_, v, _)| *v == c)
        .expect("column");
    let (stored, name, unit) = COLUMNS[i];
    let x = match pack(i) {
        Pack::Rare => format!("(CASE WHEN l.{stored} IS NULL THEN NULL ELSE d.{stored} END)"),
        _ => format!("d.{stored}"),
    };
    match unit {
        Unit::Plain | Unit::Errors => format!("{x} AS {name}"),
        Unit::Mib => format!("1048576 * {x} AS {name}"),
        Unit::Kib => format!("1024 * {x} AS {name}"),
        Unit::Milli => format!("{x} / 1000.0 AS {name}"),
        Unit::Centi => format!("{x} / 100.0 AS {name}"),
    }
}
