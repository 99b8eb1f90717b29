//! The file-format contract: one SQLite file per job per node.
//!
//! Users open these files with `sqlite3` or pandas, so the *views* have plain names with units
//! in the column names; the *table* behind them is packed to meet the size budget (a 7-day job
//! at 5 s must stay under 10 MB per node). Change anything here only together with
//! [`SCHEMA_VERSION`] and the README.
//!
//! Tables:
//! - `meta(key, value)`: job facts as text (see `JobMeta`); `started_unix_ms` is the time base
//!   of `samples_packed.t_ms`.
//! - `steps(id, step, started_unix_ms, ended_unix_ms, tasks, exit_status)`: one row per step
//!   seen on this node; `id` is the series number of that step's samples (the job is series 0).
//! - `samples_packed(t_ms, series, kind, <value columns>)`: the time series, packed:
//!   * `t_ms` is milliseconds since `meta.started_unix_ms` (4 bytes instead of 6);
//!   * `kind` 0 = periodic, 1 = start boundary, 2 = end boundary (0 costs no payload byte);
//!   * every value column holds the *difference from the previous non-NULL value of the same
//!     column in the same series* (the first non-NULL value is stored whole). Cumulative
//!     counters then take 1–4 bytes instead of 6–8 and near-constant figures (limit, peak,
//!     process count) take 0. NULL still means "unreadable" and is skipped by the chain, so
//!     `value = SUM(column) OVER (PARTITION BY series ORDER BY rowid)` wherever the cell is
//!     not NULL — exactly what the `samples` view computes;
//!   * memory is stored in KiB (`_kib`; the kernel reports whole pages, so nothing is lost),
//!     PSI in hundredths of a percent (the kernel prints two decimals), effective cores in
//!     thousandths of a core: all integers, because a REAL always costs 8 bytes.
//!
//!   No secondary index: rows are only appended, and readers scan one series at a time.
//!   Measured (benches/store.rs): 60–75 bytes per job row, 7.3–9.1 MB for 7 days at 5 s.
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
//!   decodes it: plain units and one `<reading>_error` text column per reading.
//! - `gpu_xid(t_unix_ms, gpu, xid)`: each critical Xid event, stamped with the reading that
//!   collected it; `gpu_samples.xid_events` counts them per row. Measured (benches/gpu.rs):
//!   see README.
//! - view `samples`: the packed table decoded: `t_unix_ms`, `series` ('job' or the step name),
//!   `kind` ('periodic'/'start'/'end'), and every value in plain units (`_bytes`, `_usec`,
//!   `_percent`, cores).
//!
//! Step series that duplicate the job series are not stored. While a step is the only
//! non-extern step running on the node (the common single-step batch job), its cgroup holds
//! everything the job's cgroup holds except the extern step's idle `sleep`: storing it again
//! would double the file for no information. So a step's *periodic* rows are stored only while
//! another non-extern step runs; its start and end rows are always stored. `Reader::samples`
//! fills the gaps from the job's rows transparently (the `samples` view shows stored rows
//! only). [`step_row_is_redundant`](super::step_row_is_redundant) is the one rule both sides use.

/// `PRAGMA user_version` of files this code writes; readers accept 1..=SCHEMA_VERSION.
pub const SCHEMA_VERSION: i64 = 1;

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
];

pub(crate) const NVALUES: usize = 25;
const _: () = assert!(VALUE_COLUMNS.len() == NVALUES);

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

pub(crate) fn create_sql() -> String {
    let values: Vec<String> = VALUE_COLUMNS
        .iter()
        .map(|(c, _, _)| format!("    {c} INTEGER"))
        .collect();
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
    t_ms   INTEGER NOT NULL,  -- ms since meta.started_unix_ms
    series INTEGER NOT NULL,  -- 0 = the job, else steps.id
    kind   INTEGER NOT NULL,  -- 0 periodic, 1 start, 2 end
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
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
",
        values.join(",\n"),
        view_sql(),
        super::gpu::create_sql()
    )
}

fn view_sql() -> String {
    let mut cols = vec![
        "(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'started_unix_ms') + t_ms AS t_unix_ms"
            .to_string(),
        "CASE series WHEN 0 THEN 'job' ELSE (SELECT step FROM steps WHERE id = series) END AS series"
            .to_string(),
        "CASE kind WHEN 0 THEN 'periodic' WHEN 1 THEN 'start' WHEN 2 THEN 'end' END AS kind"
            .to_string(),
    ];
    for (c, v, scale) in VALUE_COLUMNS {
        let sum = format!("SUM({c}) OVER w");
        let expr = match scale {
            Scale::Plain => sum,
            Scale::Kib => format!("1024 * {sum}"),
            Scale::Centi => format!("{sum} / 100.0"),
            Scale::Milli => format!("{sum} / 1000.0"),
        };
        cols.push(format!(
            "CASE WHEN {c} IS NULL THEN NULL ELSE {expr} END AS {v}"
        ));
    }
    format!(
        "-- Decoded samples in plain units (stored rows only; see store/schema.rs).
CREATE VIEW samples AS SELECT
    {}
FROM samples_packed
WINDOW w AS (PARTITION BY series ORDER BY rowid ROWS UNBOUNDED PRECEDING);",
        cols.join(",\n    ")
    )
}
