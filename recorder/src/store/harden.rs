//! The one rule for opening a job's file: nothing in it may make us run its author's code,
//! hang, or read past a bound (docs/design.md §7). Root opens files a user may have written, and a
//! user's CLI opens files another user may have planted, so every connection of
//! [`Reader`](super::Reader) and [`Writer`](super::Writer) goes through here:
//!
//! - [`open_file`]: the path is opened `O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC` (a FIFO must not
//!   block), must be a regular file of at most [`MAX_FILE_BYTES`] with a sane header, and
//!   SQLite must then have opened that same inode ([`same_inode`]);
//! - [`configure`]: defensive mode, `trusted_schema` off, tight `sqlite3_limit`s (a schema
//!   with a compound SELECT — every recursive CTE — or a deep or huge expression does not even
//!   parse), and a progress handler that interrupts any statement once the connection's
//!   [`Guard`] deadline has passed;
//! - [`check_schema`]: before any query touches a table, `sqlite_master` must hold exactly
//!   what our own writers create for the file's schema version — no view, trigger, index or
//!   table of anyone else's, and no changed DDL. Views are then never run by us at all.
//!
//! Hand-written rather than a crate: rusqlite exposes the primitives (db config, limits, the
//! progress handler), and the rest — which DDL is ours, which bounds our queries need — is
//! this format's own contract, which no general crate knows.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::limits::Limit;
use rusqlite::Connection;

use super::fault::{db_err, sql_err, unexpected_schema};
use super::schema::{APPLICATION_ID, MAX_FILE_BYTES, SCHEMA_VERSION};
use crate::error::{Error, Result};

/// Each public call of a [`Reader`](super::Reader) (a whole series decoded, say) must finish
/// within this unless the caller gave a tighter [`Deadline`]. A 7-day file takes well under a
/// second.
pub const READ_CALL_BUDGET: Duration = Duration::from_secs(10);

/// Each call of a [`Writer`](super::Writer) (a flush, a step's start): it runs on the sampler
/// thread or in a SPANK callback, which must never stall for long.
pub const WRITE_CALL_BUDGET: Duration = Duration::from_secs(5);

/// VM instructions between two looks at the clock: ~10 µs of work, so a deadline is kept to
/// well within a millisecond and the clock costs < 1 % (see examples/summarise_cost.rs).
const PROGRESS_OPS: i32 = 1000;

/// A total time budget for everything done with one file (several connections, e.g. the
/// epilog's reader and its summary write), on top of the per-call budget.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    budget: Duration,
}

impl Deadline {
    pub fn after(budget: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + budget,
            budget,
        }
    }

    pub fn budget(&self) -> Duration {
        self.budget
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }
}

/// One connection's deadline, shared with its progress handler. Armed at the start of each
/// public call ([`Guard::call`]); a call nested in another keeps the outer one's deadline.
#[derive(Clone)]
pub(crate) struct Guard(Arc<State>);

struct State {
    epoch: Instant,
    per_call: Duration,
    overall: Option<Deadline>,
    /// Nanoseconds since `epoch` after which the handler interrupts.
    due_ns: AtomicU64,
    /// The budget that `due_ns` stands for, in ms (for the message).
    budget_ms: AtomicU64,
    fired: AtomicBool,
    depth: AtomicU32,
    /// "read" or "written": what did not happen when the deadline fired.
    verb: &'static str,
}

impl Guard {
    pub(crate) fn new(per_call: Duration, overall: Option<Deadline>, verb: &'static str) -> Guard {
        Guard(Arc::new(State {
            epoch: Instant::now(),
            per_call,
            overall,
            due_ns: AtomicU64::new(u64::MAX),
            budget_ms: AtomicU64::new(0),
            fired: AtomicBool::new(false),
            depth: AtomicU32::new(0),
            verb,
        }))
    }

    fn arm(&self) {
        let s = &self.0;
        let now = s.epoch.elapsed();
        let mut due = now + s.per_call;
        let mut budget = s.per_call;
        if let Some(d) = s.overall {
            let at = d.at.saturating_duration_since(s.epoch);
            if at < due {
                (due, budget) = (at, d.budget);
            }
        }
        s.budget_ms
            .store(budget.as_millis() as u64, Ordering::Relaxed);
        s.fired.store(false, Ordering::Relaxed);
        s.due_ns.store(
            due.as_nanos().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    /// Runs one public call under the deadline; an error caused by the deadline becomes
    /// "… took longer than N s: not read".
    pub(crate) fn call<T>(&self, path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let s = &self.0;
        let outer = s.depth.fetch_add(1, Ordering::Relaxed) == 0;
        if outer {
            self.arm();
        }
        // A statement shorter than PROGRESS_OPS never meets the handler: a call that starts
        // after the deadline must not run at all.
        if outer && s.epoch.elapsed().as_nanos() >= u128::from(s.due_ns.load(Ordering::Relaxed)) {
            s.depth.fetch_sub(1, Ordering::Relaxed);
            return Err(self.timed_out(path));
        }
        let r = f();
        s.depth.fetch_sub(1, Ordering::Relaxed);
        match r {
            Err(_) if outer && s.fired.load(Ordering::Relaxed) => Err(self.timed_out(path)),
            r => r,
        }
    }

    fn timed_out(&self, path: &Path) -> Error {
        let ms = self.0.budget_ms.load(Ordering::Relaxed);
        sql_err(
            path,
            format!(
                "took longer than {} s: not {}",
                ms as f64 / 1000.0,
                self.0.verb
            ),
        )
    }

    fn install(&self, conn: &Connection) {
        let s = Arc::clone(&self.0);
        conn.progress_handler(
            PROGRESS_OPS,
            Some(move || {
                let late =
                    s.epoch.elapsed().as_nanos() > u128::from(s.due_ns.load(Ordering::Relaxed));
                if late {
                    s.fired.store(true, Ordering::Relaxed);
                }
                late
            }),
        );
    }
}

/// Opens `path` for the pre-checks: never follows a symlink, never blocks (FIFO), and refuses
/// anything but a regular file of at most [`MAX_FILE_BYTES`] whose header is sane.
pub(crate) fn open_file(path: &Path, write: bool) -> Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => sql_err(path, "is a symbolic link: not opened"),
            _ => Error::Store(format!("cannot open {}: {e}", path.display())),
        })?;
    let md = f.metadata().map_err(|e| sql_err(path, e))?;
    if !md.is_file() {
        return Err(sql_err(path, "not a regular file: not opened"));
    }
    if md.len() > MAX_FILE_BYTES {
        return Err(sql_err(
            path,
            format!(
                "{} bytes, over the {} MiB a job's file may have: not opened",
                md.len(),
                MAX_FILE_BYTES >> 20
            ),
        ));
    }
    check_header(path, md.len(), &f)?;
    Ok(f)
}

/// SQLite opened `path` by name: it must be the inode [`open_file`] checked.
pub(crate) fn same_inode(path: &Path, file: &File) -> Result<()> {
    let ours = file.metadata().map_err(|e| sql_err(path, e))?;
    let now = std::fs::symlink_metadata(path).map_err(|e| sql_err(path, e))?;
    if (ours.dev(), ours.ino()) != (now.dev(), now.ino()) {
        return Err(sql_err(path, "the file was replaced while being opened"));
    }
    Ok(())
}

/// Limits that our own schema and queries stay well inside (the test
/// `limits_leave_room_for_our_schema` measures the margin). A view or expression beyond them
/// makes the schema fail to parse: the file is refused before anything runs.
const LIMITS: &[(Limit, i32)] = &[
    (Limit::SQLITE_LIMIT_LENGTH, 1 << 20),
    (Limit::SQLITE_LIMIT_SQL_LENGTH, 64 << 10),
    (Limit::SQLITE_LIMIT_COLUMN, 128),
    (Limit::SQLITE_LIMIT_EXPR_DEPTH, 64),
    // 1: no compound SELECT at all (0 would mean "unlimited"); we write none.
    (Limit::SQLITE_LIMIT_COMPOUND_SELECT, 1),
    (Limit::SQLITE_LIMIT_VDBE_OP, 50_000),
    (Limit::SQLITE_LIMIT_FUNCTION_ARG, 8),
    (Limit::SQLITE_LIMIT_ATTACHED, 0),
    (Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 64),
    (Limit::SQLITE_LIMIT_VARIABLE_NUMBER, 64),
    (Limit::SQLITE_LIMIT_TRIGGER_DEPTH, 1),
    (Limit::SQLITE_LIMIT_WORKER_THREADS, 0),
];

/// Hardens a fresh connection before its first query (the first query loads the schema).
pub(crate) fn configure(conn: &Connection, guard: &Guard) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    for &(limit, value) in LIMITS {
        conn.set_limit(limit, value);
    }
    guard.install(conn);
    conn.execute_batch("PRAGMA trusted_schema = OFF;")
}

/// Runs `f` with one attached database allowed (`VACUUM INTO` attaches its target).
pub(crate) fn with_attach<T>(conn: &Connection, f: impl FnOnce() -> T) -> T {
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 1);
    let r = f();
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0);
    r
}

/// One row of `sqlite_master`, its SQL whitespace-normalised.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Entry {
    kind: String,
    name: String,
    tbl: String,
    sql: Option<String>,
}

/// Collapses each run of whitespace to one space, or to one newline if it holds one: a
/// newline ends a `--` comment, so keeping it keeps what is code and what is comment.
fn normalise(sql: &str) -> String {
    // SQLite's whitespace is ASCII; bytes keep this cheap (it runs over ~40 KB per open).
    let mut out = Vec::with_capacity(sql.len());
    let mut run: Option<bool> = None; // Some(saw a newline) while in a whitespace run
    for &c in sql
        .trim_matches(|c: char| c.is_ascii_whitespace())
        .as_bytes()
    {
        if c.is_ascii_whitespace() {
            run = Some(run.unwrap_or(false) || c == b'\n');
            continue;
        }
        if let Some(nl) = run.take() {
            out.push(if nl { b'\n' } else { b' ' });
        }
        out.push(c);
    }
    String::from_utf8(out).expect("only ASCII bytes were removed")
}

fn entries(conn: &Connection) -> rusqlite::Result<Vec<Entry>> {
    let mut st = conn.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master")?;
    let rows = st.query_map([], |r| {
        Ok(Entry {
            kind: r.get(0)?,
            name: r.get(1)?,
            tbl: r.get(2)?,
            sql: r.get::<_, Option<String>>(3)?.map(|s| normalise(&s)),
        })
    })?;
    rows.collect()
}

/// What our DDL `ddl` leaves in `sqlite_master` (run in memory: SQLite's own text for it).
fn catalogue(ddl: &str) -> Vec<Entry> {
    let c = Connection::open_in_memory().expect("in-memory SQLite");
    c.execute_batch(ddl).expect("our own DDL runs");
    entries(&c).expect("our own schema reads")
}

/// Objects whose presence is optional, as a group: all of a group or none of it.
struct Expected {
    required: Vec<Entry>,
    optional: Vec<Vec<Entry>>,
}

const GPU_TABLES: &[&str] = &[
    "gpus",
    "gpu_links",
    "gpu_samples",
    "gpu_rare",
    "gpu_xid",
    "gpu_readings",
];

fn expected(version: i64) -> &'static Expected {
    static V1: OnceLock<Expected> = OnceLock::new();
    static V2: OnceLock<Expected> = OnceLock::new();
    static V3: OnceLock<Expected> = OnceLock::new();
    static V4: OnceLock<Expected> = OnceLock::new();
    let summary = || catalogue(super::schema::SUMMARY_CREATE);
    if version == 1 {
        // The schema-1 writer's DDL as committed in core/tests/fixtures/store/v1.sqlite. Files
        // from before GPU recording have no GPU tables; a schema-1 file never gains them.
        V1.get_or_init(|| {
            let (gpu, core) = catalogue(include_str!("schema_v1.sql"))
                .into_iter()
                .partition(|e| GPU_TABLES.contains(&e.tbl.as_str()));
            Expected {
                required: core,
                optional: vec![gpu, summary()],
            }
        })
    } else {
        let (cell, kept) = match version {
            2 => (&V2, include_str!("catalogue_v2.json")),
            3 => (&V3, include_str!("catalogue_v3.json")),
            _ => (&V4, CURRENT_CATALOGUE),
        };
        cell.get_or_init(|| {
            let (required, summary) = kept_catalogue(kept);
            Expected {
                required,
                optional: vec![summary],
            }
        })
    }
}

/// What SQLite makes of the current schema's DDL (`schema::create_sql`, then the summary
/// table), as `catalogue` would find it, kept in `catalogue_v4.json`: running the DDL in
/// memory costs ~2–4 ms of CPU, paid by every slurmstepd of a recorded step (one process per
/// step); reading the kept copy ~0.1 ms. The test `the_kept_catalogue_is_what_sqlite_makes_of_our_ddl`
/// compares the two, and rewrites the file with `SLURMWATCH_UPDATE_CATALOGUE=1`.
/// `catalogue_v2.json` and `catalogue_v3.json` are schemas 2 and 3's, kept as they were when
/// the next came (the fixture
/// `core/tests/fixtures/store/v2.sqlite` is checked against it).
const CURRENT_CATALOGUE: &str = include_str!("catalogue_v4.json");

fn kept_catalogue(json: &str) -> (Vec<Entry>, Vec<Entry>) {
    serde_json::from_str(json).expect("the kept catalogue parses")
}

/// Refuses a file whose `sqlite_master` is not exactly what our writers create for its schema
/// version, or whose version we do not read ([`check_version`]); returns the version. Run it
/// before any query that reads a table or view.
pub(crate) fn check_schema(conn: &Connection, path: &Path) -> Result<i64> {
    let refuse = |what: String| unexpected_schema(path, &what);
    // Reading sqlite_master parses every entry: one beyond our limits, or not SQL, fails
    // here (db_err words it as an unexpected schema).
    let found = entries(conn).map_err(|e| db_err(path, e))?;
    let version = check_version(conn, path)?;
    let exp = expected(version);
    let all = || exp.required.iter().chain(exp.optional.iter().flatten());
    let mut seen = std::collections::HashSet::new();
    for e in &found {
        if !seen.insert(e.name.as_str()) {
            return Err(refuse(format!("{} `{}` twice", e.kind, e.name)));
        }
    }
    // Our own objects redefined first (the likelier attack, and the clearer message), then
    // anything that is not ours.
    for e in &found {
        match all().find(|x| x.name == e.name) {
            Some(x) if x.kind != e.kind => {
                return Err(refuse(format!(
                    "{} `{}` where slurmwatch has a {}",
                    e.kind, e.name, x.kind
                )))
            }
            Some(x) if x != e => {
                return Err(refuse(format!(
                    "{} `{}` is not defined as slurmwatch defines it",
                    e.kind, e.name
                )))
            }
            _ => {}
        }
    }
    if let Some(e) = found.iter().find(|e| !all().any(|x| x.name == e.name)) {
        return Err(refuse(format!("{} `{}`, not slurmwatch's", e.kind, e.name)));
    }
    let missing = |x: &&Entry| !seen.contains(x.name.as_str());
    if let Some(x) = exp.required.iter().find(missing) {
        return Err(refuse(format!("no {} `{}`", x.kind, x.name)));
    }
    for group in &exp.optional {
        let have = group.iter().filter(|x| !missing(x)).count();
        if have > 0 && have < group.len() {
            let x = group.iter().find(missing).expect("one is missing");
            return Err(refuse(format!("no {} `{}`", x.kind, x.name)));
        }
    }
    Ok(version)
}

/// Cheap checks before SQLite sees the file: the magic string, and a length that matches the
/// page count in the header (a file cut short by a copy or a full disk).
pub(crate) fn check_header(path: &Path, len: u64, mut f: &File) -> Result<()> {
    if len == 0 {
        return Err(sql_err(
            path,
            "empty file (not a slurmwatch file, or creation was interrupted)",
        ));
    }
    let mut h = [0u8; 100];
    if len < 100 || f.read_exact(&mut h).is_err() || &h[..16] != b"SQLite format 3\0" {
        return Err(sql_err(
            path,
            "not an SQLite database (truncated, or another kind of file)",
        ));
    }
    let page_size = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65536,
        n => u64::from(n),
    };
    let pages = u64::from(u32::from_be_bytes([h[28], h[29], h[30], h[31]]));
    // The page count is valid only when "version-valid-for" matches the change counter.
    let counted = h[24..28] == h[92..96] && pages > 0;
    if page_size < 512 || (counted && len < pages * page_size) || len / page_size * page_size != len
    {
        return Err(sql_err(
            path,
            format!(
                "the file is truncated ({len} bytes; its header describes {} bytes) — it was cut off while being written or copied",
                pages * page_size
            ),
        ));
    }
    Ok(())
}

/// Refuses files that are not slurmwatch's or come from a newer slurmwatch; returns the
/// file's schema version (1..=SCHEMA_VERSION).
pub(crate) fn check_version(conn: &Connection, path: &Path) -> Result<i64> {
    let (version, app): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version), (SELECT application_id FROM pragma_application_id)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| db_err(path, e))?;
    if version > SCHEMA_VERSION {
        return Err(sql_err(
            path,
            format!(
                "written by a newer slurmwatch (schema {version}); this one reads up to {SCHEMA_VERSION} — upgrade slurmwatch"
            ),
        ));
    }
    if app != APPLICATION_ID || version < 1 {
        return Err(sql_err(
            path,
            "an SQLite database, but not a slurmwatch file",
        ));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handler stops a statement that would run for hours, soon after the budget.
    #[test]
    fn a_long_statement_is_interrupted_at_the_per_call_budget() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE t(x);
             WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r LIMIT 100000)
             INSERT INTO t SELECT n FROM r;",
        )
        .unwrap();
        let guard = Guard::new(Duration::from_millis(50), None, "read");
        configure(&c, &guard).unwrap();
        let t = Instant::now();
        let e = guard
            .call(Path::new("/x"), || {
                c.query_row("SELECT count(*) FROM t a, t b", [], |r| r.get::<_, i64>(0))
                    .map_err(|e| db_err(Path::new("/x"), e))
            })
            .unwrap_err();
        assert_eq!(e.to_string(), "/x: took longer than 0.05 s: not read");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        // The next call has its own budget.
        let n = guard.call(Path::new("/x"), || {
            c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
                .map_err(|e| db_err(Path::new("/x"), e))
        });
        assert_eq!(n.unwrap(), 100_000);
    }

    #[test]
    fn the_kept_catalogue_is_what_sqlite_makes_of_our_ddl() {
        let made = (
            catalogue(&super::super::schema::create_sql()),
            catalogue(super::super::schema::SUMMARY_CREATE),
        );
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/src/store/catalogue_v4.json");
        if std::env::var_os("SLURMWATCH_UPDATE_CATALOGUE").is_some() {
            let json = serde_json::to_string_pretty(&made).unwrap();
            std::fs::write(file, json + "\n").unwrap();
        }
        assert!(
            kept_catalogue(CURRENT_CATALOGUE) == made,
            "{file} is not what SQLite makes of the schema's DDL: after changing the schema, \
             run SLURMWATCH_UPDATE_CATALOGUE=1 cargo test -p slurmwatch-recorder kept_catalogue \
             and commit the file"
        );
    }

    #[test]
    fn normalising_keeps_newlines_that_end_comments() {
        assert_eq!(normalise("  a \t b\n  -- c\n d  "), "a b\n-- c\nd");
        assert_ne!(normalise("-- c d\ne"), normalise("-- c\nd e"));
    }

    /// Our schema must parse with room to spare under [`LIMITS`]: find the least expression
    /// depth and SQL length each version needs and require twice that.
    #[test]
    fn limits_leave_room_for_our_schema() {
        for ddl in [
            include_str!("schema_v1.sql").to_string(),
            super::super::schema::create_sql(),
        ] {
            let parses = |limit: Limit, v: i32| {
                let c = Connection::open_in_memory().unwrap();
                c.execute_batch(&ddl).unwrap();
                c.set_limit(limit, v);
                // A fresh schema load under the limit: re-read through a second statement
                // after a schema reset.
                c.execute_batch("PRAGMA writable_schema = RESET;").unwrap();
                c.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
                    .is_ok()
            };
            for &(limit, value) in LIMITS {
                assert!(parses(limit, value), "{limit:?} = {value} too tight");
            }
            // Twice the room we need in expression depth and statement length...
            assert!(parses(Limit::SQLITE_LIMIT_EXPR_DEPTH, LIMITS[3].1 / 2));
            assert!(parses(Limit::SQLITE_LIMIT_SQL_LENGTH, LIMITS[1].1 / 2));
            // ...and the check bites: far less room refuses our own schema.
            assert!(!parses(Limit::SQLITE_LIMIT_EXPR_DEPTH, 3));
            assert!(!parses(Limit::SQLITE_LIMIT_SQL_LENGTH, 1000));
        }
    }
}
