//! The file-format contract: one SQLite file per job per node.
//!
//! Users open these files with `sqlite3` or pandas, so the *views* have plain names with units
//! in the column names; the *table* behind them is packed to meet the size budget (a 7-day job
//! at 5 s must stay under 10 MB per node). Change anything here only together with
//! [`SCHEMA_VERSION`] and docs/reference/file-format.md.
//!
//! Tables:
//! - `meta(key, value)`: job facts as text (see `JobMeta`); `started_unix_ms` is the time base
//!   of `samples_packed.t_ms`.
//! - `steps(id, step, started_unix_ms, ended_unix_ms, tasks, exit_status)`: one row per step
//!   seen on this node; `id` is the series number of that step's samples (the job is series 0).
//! - `samples_packed(t_ms, series, <main value columns>)` and `samples_rare(id, kind,
//!   <rare value columns>)`: the time series, packed (schema 2; schema 1 below). One
//!   `samples_packed` row per stored sample; a `samples_rare` row (`id` = that row's rowid)
//!   only where one of the rare columns changed or became (un)readable, and for the series'
//!   first row and every start/end row. SQLite spends a header byte on every column of every
//!   row, NULL or 0 included: the ~11 columns that almost never change cost 11 bytes a row in
//!   one table, ~0 in their own. Per column (`ENC`):
//!   * `t_ms` is a second difference: the change of the time step from the series' previous
//!     row (time = the running sum of the running sum; the first row's step counts from
//!     `meta.started_unix_ms`): 0–1 byte at a steady interval instead of 4;
//!   * `kind` (in `samples_rare`; a row without one is periodic) 0 = periodic, 1 = start
//!     boundary, 2 = end boundary;
//!   * `Delta` columns hold the *difference from the previous non-NULL value of the same
//!     column in the same series* (the first non-NULL value is stored whole). Cumulative
//!     counters then take 1–4 bytes instead of 6–8. NULL means "unreadable" and is skipped by
//!     the chain, so `value = SUM(column) OVER (PARTITION BY series ORDER BY rowid)` wherever
//!     the cell is not NULL;
//!   * `Delta2` columns (CPU usage and user time) hold the change of that difference (a
//!     second difference): a counter climbing at a steady rate stores about 0. Decoded with
//!     two running sums, each over the non-NULL cells;
//!   * `Resid` columns hold the difference from other values *of the same row*, decoded:
//!     `cpu_system_usec` from usage − user (the kernel splits usage into the two: 0 or ±1 µs),
//!     `memory_working_set_kib` from usage − cache (how it is computed: 0), and
//!     `memory_working_set_max_kib` from the working set. Where an operand is NULL the cell
//!     holds the value itself; NULL = unreadable;
//!   * `Rare` columns (in `samples_rare`) chain like `Delta` ones over the series'
//!     `samples_rare` rows (NULL = unreadable there); a `samples_packed` row without a
//!     `samples_rare` row keeps the state of the latest one: the same value, or unreadable;
//!   * memory is stored in KiB (`_kib`; the kernel reports whole pages, so nothing is lost),
//!     PSI averages in hundredths of a percent (the kernel prints two decimals), PSI stall
//!     totals in whole ms (`_total_ms`, from the kernel's µs), effective cores in
//!     thousandths of a core: all integers, because a REAL always costs 8 bytes.
//!
//!   No secondary index: rows are only appended, and readers scan one series at a time.
//!   `samples_rare.id` is a `samples_packed` rowid. Rows are never deleted, so those rowids
//!   run 1..n: a plain `VACUUM` (which renumbers a table without an INTEGER PRIMARY KEY)
//!   gives them the same numbers, and `VACUUM INTO` (the archive copy) keeps them as they are.
//!   (A declared `id INTEGER PRIMARY KEY` would cost a header byte per row: SQLite stores a
//!   NULL for it, as it stores every NULL column of a row, trailing ones included.)
//!   Measured (benches/store.rs, 7 days at 5 s): single-step batch job 5.5–7.4 MB (46–61
//!   bytes per job row), batch + a week-long `srun` step (its rows every 6th interval)
//!   7.7–9.9 MB; schema 2 (no stall totals) took 5.0–6.3 and 7.0–8.5 MB, schema 1 7.3–9.1
//!   and 9.9–12.0 MB.
//!
//!   Schema 4 added `output_sizes` (below); its other tables are schema 3's. Schema 3
//!   appended the six PSI stall totals to the value columns; a schema-2 file (still
//!   read, and appended to as schema 2 by a writer that reopens it) has the first 25.
//!
//!   Schema 1 (`PRAGMA user_version = 1`, still read, and still appended to by a writer that
//!   reopens such a file): no `samples_rare`; `samples_packed(t_ms, series, kind, <all 25
//!   value columns>)` with `t_ms` counted from `meta.started_unix_ms` and every value column
//!   a `Delta` column.
//! - `events(t_unix_ms, step, kind, detail)`: step start/end, OOM kills, sampler errors,
//!   `gpu` (why a step has no GPU section, or which cards it records).
//! - `gpus(id, uuid, label, cuda_index, nvml_index, pci_bus_id, name, memory_total_bytes,
//!   power_limit_watts, sm_clock_max_mhz, nvlink_links, step, first_unix_ms)`: the job's
//!   cards, once each, keyed by UUID; `label` is `cuda:N` as the job's code addresses it.
//! - `gpu_links(a, b, level, nvlink_links)`: how each pair of the job's cards is wired.
//! - `gpu_samples(t_ms, gpu, <readings>, errors)`: one row per card per stored sample,
//!   packed like `samples_packed` but per card (`t_ms` and every value column hold the
//!   difference from the card's previous non-NULL value); NULL = unreadable and `errors`
//!   holds the NVML error, 4 bits per reading (see `store/gpu.rs`). View `gpu_readings`
//!   decodes it: plain units and one `<reading>_error` text column per reading. Schema 3
//!   appended the exact ledger's columns (`store/gpu/ledger.rs`): NVML's violation time per
//!   limiter and the card's no-work time, both cumulative in ms, GPM in 1/100 %, and their
//!   errors word (packed further: the busy limiters as second differences, the covered time
//!   as the interval it left uncovered, and the seldom-changing limiters and the errors word
//!   in `gpu_rare(id, …)`, a row only where one changes, like `samples_rare`:
//!   `store/gpu/chain.rs`).
//! - `gpu_xid(t_unix_ms, gpu, xid)`: each critical Xid event, stamped with the reading that
//!   collected it; `gpu_samples.xid_events` counts them per row. Measured (benches/gpu.rs):
//!   see docs/reference/file-format.md.
//! - `output_sizes(t_unix_ms, fd, bytes)` (schema 4): the size of the batch script's
//!   stdout (`fd` 1) and of its stderr when that is another file (`fd` 2), read by `statx`
//!   beside the stored rows; the knots of its growth only (`recording/output.rs`).
//! - view `samples`: the packed tables decoded: `t_unix_ms`, `series` ('job' or the step
//!   name), `kind` ('periodic'/'start'/'end'), and every value in plain units (`_bytes`,
//!   `_usec`, `_percent`, cores). Pure SQL (window sums and a join), so `sqlite3` and pandas
//!   users read it as before; the same columns and meaning in schema 1 and 2.
//!
//! Step series that duplicate the job series are not stored. While a step is the only
//! non-extern step running on the node (the common single-step batch job), its cgroup holds
//! everything the job's cgroup holds except the extern step's idle `sleep`: storing it again
//! would double the file for no information. So a step's *periodic* rows are stored only while
//! another non-extern step runs; its start and end rows are always stored. `Reader::samples`
//! fills the gaps from the job's rows transparently (the `samples` view shows stored rows
//! only). [`step_row_is_redundant`](super::step_row_is_redundant) is the one rule both sides use.

/// `PRAGMA user_version` of files this code creates; readers accept 1..=SCHEMA_VERSION, and a
/// writer reopening an older file keeps its version.
pub const SCHEMA_VERSION: i64 = 4;
// The GPU tables' DDL follows it without importing it (the modules would depend on each other).
const _: () = assert!(super::gpu::NEWEST == SCHEMA_VERSION);

/// Largest job file anyone opens (checked before SQLite sees it, see `harden`). A 7-day job
/// at 5 s is 5–9 MB per node (measured above), so this is several weeks of the densest case;
/// past it a file is refused rather than given minutes of CPU and gigabytes of rows.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// `PRAGMA application_id`: "SWat". Tells a slurmwatch file from any other SQLite file.
pub const APPLICATION_ID: i64 = 0x5357_6174;

/// How a value column is scaled between `SampleRow` and the packed table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scale {
    /// Stored as is; the view name is the table name.
    Plain,
    /// Bytes stored as KiB (rounded to nearest); the view multiplies by 1024.
    Kib,
    /// A percentage stored in hundredths; the view divides by 100.0.
    Centi,
    /// A number of cores stored in thousandths; the view divides by 1000.0.
    Milli,
    /// Microseconds stored as whole milliseconds (rounded to nearest); the view multiplies
    /// by 1000. A stall counter's µs cost a byte more per row and column than its ms, and
    /// the ledger needs no finer than a ms.
    UsecAsMs,
}

/// (column in `samples_packed`, column in the `samples` view, scale). Order is the codec's order.
pub(crate) const VALUE_COLUMNS: &[(&str, &str, Scale)] = &[
    ("cpu_usage_usec", "cpu_usage_usec", Scale::Plain),
    ("cpu_user_usec", "cpu_user_usec", Scale::Plain),
    ("cpu_system_usec", "cpu_system_usec", Scale::Plain),
    ("memory_usage_kib", "memory_usage_bytes", Scale::Kib),
    ("memory_cache_kib", "memory_cache_bytes", Scale::Kib),
    (
        "memory_working_set_kib",
        "memory_working_set_bytes",
        Scale::Kib,
    ),
    (
        "memory_lifetime_peak_kib",
        "memory_lifetime_peak_bytes",
        Scale::Kib,
    ),
    ("memory_limit_kib", "memory_limit_bytes", Scale::Kib),
    ("memory_oom_kills", "memory_oom_kills", Scale::Plain),
    ("memory_limit_hits", "memory_limit_hits", Scale::Plain),
    ("memory_major_faults", "memory_major_faults", Scale::Plain),
    ("io_read_bytes", "io_read_bytes", Scale::Plain),
    ("io_write_bytes", "io_write_bytes", Scale::Plain),
    ("processes", "processes", Scale::Plain),
    ("threads", "threads", Scale::Plain),
    (
        "pressure_cpu_some_avg10_centipercent",
        "pressure_cpu_some_avg10_percent",
        Scale::Centi,
    ),
    (
        "pressure_memory_some_avg10_centipercent",
        "pressure_memory_some_avg10_percent",
        Scale::Centi,
    ),
    (
        "pressure_memory_full_avg10_centipercent",
        "pressure_memory_full_avg10_percent",
        Scale::Centi,
    ),
    (
        "pressure_io_some_avg10_centipercent",
        "pressure_io_some_avg10_percent",
        Scale::Centi,
    ),
    (
        "pressure_io_full_avg10_centipercent",
        "pressure_io_full_avg10_percent",
        Scale::Centi,
    ),
    ("cores_allocated", "cores_allocated", Scale::Plain),
    (
        "memory_working_set_max_kib",
        "memory_working_set_max_bytes",
        Scale::Kib,
    ),
    (
        "effective_cores_max_millicores",
        "effective_cores_max",
        Scale::Milli,
    ),
    ("sampler_cpu_usec", "sampler_cpu_usec", Scale::Plain),
    (
        "sampler_bytes_written",
        "sampler_bytes_written",
        Scale::Plain,
    ),
    // Schema 3: PSI's cumulative stall time (`total=`), the exact ledger's source.
    (
        "pressure_cpu_some_total_ms",
        "pressure_cpu_some_total_usec",
        Scale::UsecAsMs,
    ),
    (
        "pressure_cpu_full_total_ms",
        "pressure_cpu_full_total_usec",
        Scale::UsecAsMs,
    ),
    (
        "pressure_memory_some_total_ms",
        "pressure_memory_some_total_usec",
        Scale::UsecAsMs,
    ),
    (
        "pressure_memory_full_total_ms",
        "pressure_memory_full_total_usec",
        Scale::UsecAsMs,
    ),
    (
        "pressure_io_some_total_ms",
        "pressure_io_some_total_usec",
        Scale::UsecAsMs,
    ),
    (
        "pressure_io_full_total_ms",
        "pressure_io_full_total_usec",
        Scale::UsecAsMs,
    ),
];

pub(crate) const NVALUES: usize = 31;
const _: () = assert!(VALUE_COLUMNS.len() == NVALUES);

/// The value columns of schemas 1 and 2: schema 3 appended the rest, so a file of an older
/// schema holds the first ones of [`VALUE_COLUMNS`] and reads as unreadable (`None`) in the
/// others.
const NVALUES_BEFORE_3: usize = 25;

/// How many of [`VALUE_COLUMNS`] a file of schema `version` has.
pub(crate) const fn nvalues_in(version: i64) -> usize {
    if version >= 3 {
        NVALUES
    } else {
        NVALUES_BEFORE_3
    }
}

/// How schema 2 stores each value column (same order as [`VALUE_COLUMNS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Enc {
    /// In `samples_packed`: the difference from the previous non-NULL value of the series
    /// (as every column of schema 1). NULL = unreadable.
    Delta,
    /// In `samples_packed`: the change of the difference between the last two non-NULL
    /// values of the series (a second difference): a counter that climbs at a steady rate
    /// stores about 0. NULL = unreadable, skipped by the chain.
    Delta2,
    /// In `samples_packed`: the difference from `plus − minus` (or `plus`) of the *same row*,
    /// decoded, when those are readable; else the value itself. NULL = unreadable.
    Resid { plus: usize, minus: Option<usize> },
    /// In `samples_rare`, which has a row only where one of these changed (or became
    /// (un)readable) or the row is a start/end row: there, the difference from the previous
    /// non-NULL value (NULL = unreadable); a row without one keeps the previous state.
    Rare,
}

const fn resid_of(plus: usize) -> Enc {
    Enc::Resid { plus, minus: None }
}

const fn resid(plus: usize, minus: usize) -> Enc {
    Enc::Resid {
        plus,
        minus: Some(minus),
    }
}

/// Schema 2's encoding of each value column. Working set = usage − cache and system CPU =
/// usage − user (to the µs rounding) by the kernel's own arithmetic, so their residuals are
/// 0; the working-set maximum since the previous row is stored against this row's working set.
pub(crate) const ENC: [Enc; NVALUES] = [
    Enc::Delta2, // cpu_usage_usec
    Enc::Delta2, // cpu_user_usec
    resid(0, 1), // cpu_system_usec ≈ usage − user
    Enc::Delta,  // memory_usage_kib
    Enc::Delta,  // memory_cache_kib
    resid(3, 4), // memory_working_set_kib = usage − cache
    Enc::Rare,   // memory_lifetime_peak_kib
    Enc::Rare,   // memory_limit_kib
    Enc::Rare,   // memory_oom_kills
    Enc::Rare,   // memory_limit_hits
    Enc::Rare,   // memory_major_faults
    Enc::Delta,  // io_read_bytes
    Enc::Delta,  // io_write_bytes
    Enc::Rare,   // processes
    Enc::Rare,   // threads
    Enc::Delta,  // pressure_cpu_some
    Enc::Rare,   // pressure_memory_some
    Enc::Rare,   // pressure_memory_full
    Enc::Delta,  // pressure_io_some
    Enc::Rare,   // pressure_io_full
    Enc::Rare,   // cores_allocated
    resid_of(5), // memory_working_set_max_kib ≈ working set
    Enc::Delta,  // effective_cores_max_millicores
    Enc::Delta,  // sampler_cpu_usec
    Enc::Delta,  // sampler_bytes_written
    // A stall counter climbs while the job waits: cpu and io climb in most rows of a busy
    // job (a `Rare` one would add a `samples_rare` row to each: measured +35 bytes a row),
    // memory only when it nears its limit.
    Enc::Delta, // pressure_cpu_some_total_ms
    Enc::Delta, // pressure_cpu_full_total_ms
    Enc::Rare,  // pressure_memory_some_total_ms
    Enc::Rare,  // pressure_memory_full_total_ms
    Enc::Delta, // pressure_io_some_total_ms
    Enc::Delta, // pressure_io_full_total_ms
];

/// Indexes of the value columns `samples_packed` holds in schema `version` (≥ 2), in table
/// order.
pub(crate) fn main_columns(version: i64) -> impl Iterator<Item = usize> {
    (0..nvalues_in(version)).filter(|&i| ENC[i] != Enc::Rare)
}

/// Indexes of the value columns `samples_rare` holds in schema `version` (≥ 2), in table order.
pub(crate) fn rare_columns(version: i64) -> impl Iterator<Item = usize> {
    (0..nvalues_in(version)).filter(|&i| ENC[i] == Enc::Rare)
}

/// `SELECT` of one series' stored rows from `rowid >= ?2` on, in stored order: schema 1:
/// `t_ms, kind, <value columns>, rowid`; schema 2: `t_ms (stored), kind, has_rare_row, <main value
/// columns>, <rare value columns>, rowid`.
pub(crate) fn select_series_sql(version: i64) -> String {
    if version == 1 {
        let cols: Vec<&str> = VALUE_COLUMNS[..nvalues_in(1)]
            .iter()
            .map(|(c, _, _)| *c)
            .collect();
        return format!(
            "SELECT t_ms, kind, {}, rowid FROM samples_packed WHERE series = ?1 AND rowid >= ?2 ORDER BY rowid",
            cols.join(", ")
        );
    }
    let cols: Vec<String> = main_columns(version)
        .map(|i| format!("p.{}", VALUE_COLUMNS[i].0))
        .chain(rare_columns(version).map(|i| format!("r.{}", VALUE_COLUMNS[i].0)))
        .collect();
    format!(
        "SELECT p.t_ms, COALESCE(r.kind, 0), r.id IS NOT NULL, {}, p.rowid
         FROM samples_packed p LEFT JOIN samples_rare r ON r.id = p.rowid
         WHERE p.series = ?1 AND p.rowid >= ?2 ORDER BY p.rowid",
        cols.join(", ")
    )
}

/// [`select_series_sql`] over every step's series at once (not the job's, series 0), the
/// series id last: one pass over the table instead of one per step.
pub(crate) fn select_steps_sql(version: i64) -> String {
    let one = select_series_sql(version);
    if version == 1 {
        return one
            .replace(" FROM samples_packed", ", series FROM samples_packed")
            .replace("series = ?1 AND rowid >= ?2", "series != 0");
    }
    one.replace(", p.rowid\n", ", p.rowid, p.series\n")
        .replace("p.series = ?1 AND p.rowid >= ?2", "p.series != 0")
}

/// Schema 2 and later: [`select_series_sql`] over the whole series (`?1`), newest first.
pub(crate) fn select_series_sql_desc(version: i64) -> String {
    select_series_sql(version)
        .replace(" AND p.rowid >= ?2", "")
        .replace("ORDER BY p.rowid", "ORDER BY p.rowid DESC")
}

/// Settings for every connection that writes. The writer runs inside the job's cgroup, so its
/// page cache and WAL count against the job's memory limit: keep both small. WAL lets readers
/// (the live view) read while the sampler writes. It is switched on only after the schema is
/// committed, so the main file is never an empty shell whose pages all sit in the `-wal`.
pub(crate) const WAL_PRAGMA: &str = "PRAGMA journal_mode = WAL;";

pub(crate) const WRITER_PRAGMAS: &str = "
    PRAGMA synchronous = NORMAL;
    PRAGMA cache_size = -256;
    PRAGMA journal_size_limit = 1048576;
    PRAGMA wal_autocheckpoint = 256;
    PRAGMA temp_store = MEMORY;
";

/// Reader connections: small cache too (the CLI may hold many files open).
pub(crate) const READER_PRAGMAS: &str = "PRAGMA cache_size = -1024;";

/// The epilog's `summary` table, added to a finished file (not part of [`create_sql`]).
pub(crate) const SUMMARY_CREATE: &str = "CREATE TABLE IF NOT EXISTS summary (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);";

pub(crate) fn create_sql() -> String {
    let decl = |i: usize| format!("    {} INTEGER", VALUE_COLUMNS[i].0);
    let values: Vec<String> = main_columns(SCHEMA_VERSION).map(decl).collect();
    let rare: Vec<String> = rare_columns(SCHEMA_VERSION).map(decl).collect();
    format!(
        "CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE steps (
    id              INTEGER PRIMARY KEY,   -- series number of the step's samples (job = 0)
    step            TEXT NOT NULL UNIQUE,  -- 'batch', 'extern', '0', '1', ...
    started_unix_ms INTEGER,
    ended_unix_ms   INTEGER,
    tasks           INTEGER,
    exit_status     INTEGER
);
-- Packed: see store/schema.rs. Read the `samples` view instead.
CREATE TABLE samples_packed (
    t_ms   INTEGER NOT NULL,  -- change of the time step (ms) from the series' previous row
    series INTEGER NOT NULL,  -- 0 = the job, else steps.id
{}
);
-- The rarely changing columns of some samples_packed rows (id = its rowid); see store/schema.rs.
CREATE TABLE samples_rare (
    id     INTEGER PRIMARY KEY,
    kind   INTEGER NOT NULL,  -- 0 periodic, 1 start, 2 end (a row without one: periodic)
{}
);
CREATE TABLE events (
    t_unix_ms INTEGER NOT NULL,
    step      TEXT,
    kind      TEXT NOT NULL,
    detail    TEXT NOT NULL
);
{}
{}
{}
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
",
        values.join(",\n"),
        rare.join(",\n"),
        view_sql(),
        super::gpu::create_sql(),
        super::output::CREATE
    )
}

/// The decoded value `i` (table units) in the view's outer query over `d` (window sums of
/// `samples_packed` and `samples_rare`) and `l` (the series' latest `samples_rare` row).
fn decoded_sql(i: usize) -> String {
    let c = VALUE_COLUMNS[i].0;
    match ENC[i] {
        Enc::Delta | Enc::Delta2 => format!("d.{c}"),
        Enc::Rare => format!("CASE WHEN l.{c} IS NULL THEN NULL ELSE d.{c} END"),
        Enc::Resid { plus, minus } => {
            let p = decoded_sql(plus);
            let (cond, base) = match minus {
                Some(m) => {
                    let m = decoded_sql(m);
                    (
                        format!("({p}) IS NULL OR ({m}) IS NULL"),
                        format!("({p}) - ({m})"),
                    )
                }
                None => (format!("({p}) IS NULL"), format!("({p})")),
            };
            format!(
                "CASE WHEN d.{c} IS NULL THEN NULL WHEN {cond} THEN d.{c} ELSE {base} + d.{c} END"
            )
        }
    }
}

fn view_sql() -> String {
    // e: first running sums (time steps, `Delta2` differences); d: the values.
    let mut first = vec![
        "p.rowid AS rid".to_string(),
        "p.series AS series".to_string(),
        "SUM(p.t_ms) OVER w AS dt".to_string(),
        "r.id AS rare_id".to_string(),
        "r.kind AS kind".to_string(),
    ];
    let mut inner = vec![
        "series".to_string(),
        "SUM(dt) OVER w AS t_ms".to_string(),
        "COALESCE(kind, 0) AS kind".to_string(),
        "MAX(rare_id) OVER w AS rare_id".to_string(),
    ];
    for (i, (c, _, _)) in VALUE_COLUMNS.iter().enumerate() {
        let running = |src: &str| {
            format!("CASE WHEN {src}{c} IS NULL THEN NULL ELSE SUM({src}{c}) OVER w END AS {c}")
        };
        let (f, d) = match ENC[i] {
            Enc::Delta2 => (running("p."), running("")),
            Enc::Delta => (format!("p.{c} AS {c}"), running("")),
            Enc::Resid { .. } => (format!("p.{c} AS {c}"), c.to_string()),
            Enc::Rare => (format!("r.{c} AS {c}"), format!("SUM({c}) OVER w AS {c}")),
        };
        first.push(f);
        inner.push(d);
    }
    let mut cols = vec![
        "(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'started_unix_ms') + d.t_ms AS t_unix_ms"
            .to_string(),
        "CASE d.series WHEN 0 THEN 'job' ELSE (SELECT step FROM steps WHERE id = d.series) END AS series"
            .to_string(),
        "CASE d.kind WHEN 0 THEN 'periodic' WHEN 1 THEN 'start' WHEN 2 THEN 'end' END AS kind"
            .to_string(),
    ];
    for (i, (_, v, scale)) in VALUE_COLUMNS.iter().enumerate() {
        let x = decoded_sql(i);
        let expr = match scale {
            Scale::Plain => x,
            Scale::Kib => format!("1024 * ({x})"),
            Scale::Centi => format!("({x}) / 100.0"),
            Scale::Milli => format!("({x}) / 1000.0"),
            Scale::UsecAsMs => format!("1000 * ({x})"),
        };
        cols.push(format!("{expr} AS {v}"));
    }
    format!(
        "-- Decoded samples in plain units (stored rows only; see store/schema.rs).
CREATE VIEW samples AS WITH e AS (SELECT
    {}
  FROM samples_packed p LEFT JOIN samples_rare r ON r.id = p.rowid
  WINDOW w AS (PARTITION BY p.series ORDER BY p.rowid ROWS UNBOUNDED PRECEDING)),
d AS (SELECT
    {}
  FROM e
  WINDOW w AS (PARTITION BY series ORDER BY rid ROWS UNBOUNDED PRECEDING))
SELECT
    {}
FROM d LEFT JOIN samples_rare l ON l.id = d.rare_id;",
        first.join(",\n    "),
        inner.join(",\n    "),
        cols.join(",\n    ")
    )
}
