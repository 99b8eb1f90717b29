//! The plugin's side: create (or reopen) a job's file and append samples in batches.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};

use super::codec::{Chain, State2};
use super::fault::{db_err, sql_err};
use super::harden::{self, Guard, WRITE_CALL_BUDGET};
use super::output::{self as output_sizes, OutputSize};
use super::reader::{load_steps, read_started};
use super::schema;
use super::{step_row_is_redundant, JobMeta, StepInfo};
use crate::error::{Error, Result};
use crate::model::SampleRow;

mod rows;

/// Rows kept in memory while flushes fail (disk full, lock held): about 1.5 MB at most.
/// Beyond it the oldest rows are dropped and an event records how many.
pub const MAX_BUFFERED_ROWS: usize = 4096;
/// The same bound for output sizes (one per stored row at most).
const MAX_BUFFERED_OUTPUT_SIZES: usize = 4096;

/// How long a write waits for another step's writer on the same file. Bounded: the sampler
/// must never stall a SPANK callback.
const BUSY_TIMEOUT: Duration = Duration::from_millis(1000);

/// Room above a file's cap for the rows that close it (step ends, events).
pub const CAP_SLACK_BYTES: u64 = 1 << 20;

pub struct Writer {
    conn: Connection,
    file: File,
    /// Every descriptor this writer opened on its `-wal`/`-shm` (for the reader grant), kept
    /// until after `conn` closes: closing one would drop all of this process's POSIX locks
    /// on that file, SQLite's included (see `core/tests/store_locks.rs`). Declared after `conn`,
    /// so dropped after it.
    sidecar_files: Vec<(&'static str, File)>,
    path: PathBuf,
    /// `meta.started_unix_ms`: rows store their time relative to it.
    base: i64,
    buffer: Vec<SampleRow>,
    /// The steps table as of the last flush (other steps' writers update it too).
    known_steps: Vec<StepInfo>,
    /// The file's schema version: a file an older slurmwatch created keeps its version.
    version: i64,
    /// Per series id: the delta chain of a schema-1 file (see `schema`). Loaded from the
    /// file on first use.
    chains: HashMap<i64, Chain>,
    /// Per series id: the same for a schema-2 file.
    states: HashMap<i64, State2>,
    dropped: u64,
    /// GPU rows waiting for the next flush: (t_unix_ms, gpus.id, reading).
    gpu_buffer: Vec<(i64, i64, crate::sample::GpuSample)>,
    /// Output-file sizes waiting for the next flush (schema 4 on).
    output_buffer: Vec<OutputSize>,
    /// Per card (`gpus.id`): its delta chain (see `store/gpu.rs`), loaded on first use.
    gpu_chains: super::gpu::Chains,
    /// The job's user, who may read the file, and whether the grant took.
    reader: Option<(u32, std::result::Result<(), String>)>,
    sidecars_granted: bool,
    /// See [`Writer::set_cap`].
    cap_bytes: Option<u64>,
    capped: bool,
    /// Each public call's deadline ([`WRITE_CALL_BUDGET`]).
    guard: Guard,
    /// `PRAGMA schema_version` when the schema was last found to be ours.
    schema_cookie: Cell<i64>,
}

impl Writer {
    /// Creates the job's file. Fails if anything exists at `path`, a symlink included: the
    /// file is created with `O_CREAT|O_EXCL|O_NOFOLLOW` and mode 0600 before SQLite opens it.
    pub fn create(path: &Path, meta: &JobMeta) -> Result<Writer> {
        Self::create_impl(path, meta, None)
    }

    /// As [`create`](Self::create), and lets `reader_uid` (the job's user) read the file and
    /// its `-wal`/`-shm` — read only: the file stays the writer's (see `access`). A filesystem
    /// without ACLs leaves the file owner-only; [`Writer::reader_grant`] says which.
    pub fn create_readable_by(path: &Path, meta: &JobMeta, reader_uid: u32) -> Result<Writer> {
        let mut w = Self::create_impl(path, meta, Some(reader_uid))?;
        w.grant_sidecars();
        Ok(w)
    }

    fn create_impl(path: &Path, meta: &JobMeta, reader: Option<u32>) -> Result<Writer> {
        let guard = Guard::new(WRITE_CALL_BUDGET, None, "written");
        guard.call(path, || Self::create_guarded(path, meta, reader, &guard))
    }

    /// The file is built under a scratch name beside `path` and renamed into place (never
    /// over anything) only once its schema and meta are committed: a reader that finds the
    /// name — the job's user polling `--once` as a step starts — never meets an empty or
    /// half-made file. Two steps creating it at once: one wins, the other gets the error and
    /// joins the winner's whole file with [`open_existing`](Self::open_existing).
    fn create_guarded(
        path: &Path,
        meta: &JobMeta,
        reader: Option<u32>,
        guard: &Guard,
    ) -> Result<Writer> {
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(Error::Store(format!(
                "cannot create {}: it exists",
                path.display()
            )));
        }
        let scratch = super::paths::creating_path(path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&scratch)
            .map_err(|e| Error::Store(format!("cannot create {}: {e}", path.display())))?;
        let mut published = false;
        let made = (|| {
            let granted = match reader {
                Some(uid) => super::access::grant_read(&file, uid).map_err(|e| e.to_string()),
                None => Ok(()),
            };
            {
                // Rollback-journal mode while unnamed: nothing of the scratch name outlives
                // this connection.
                let conn = open_rw(&scratch, &file, guard)?;
                let tx_sql = format!(
                    "BEGIN;\n{}\n{}COMMIT;",
                    schema::create_sql(),
                    meta_sql(meta)
                );
                conn.execute_batch(&tx_sql).map_err(|e| db_err(path, e))?;
            }
            rename_no_replace(&scratch, path)
                .map_err(|e| Error::Store(format!("cannot create {}: {e}", path.display())))?;
            published = true;
            let conn = open_rw(path, &file, guard)?;
            conn.execute_batch(schema::WAL_PRAGMA)
                .map_err(|e| db_err(path, e))?;
            let cookie = schema_cookie(&conn, path)?;
            Ok((conn, granted, cookie))
        })();
        match made {
            Ok((conn, granted, cookie)) => {
                let mut w = Writer::new(
                    conn,
                    file,
                    path,
                    meta.started_unix_ms,
                    schema::SCHEMA_VERSION,
                    guard.clone(),
                    cookie,
                );
                w.reader = reader.map(|uid| (uid, granted));
                Ok(w)
            }
            Err(e) => {
                // Our own, empty or half-made file: remove it so a retry can create it again.
                drop(file);
                let ours = if published { path } else { &scratch };
                for suffix in super::paths::SIDECARS {
                    let _ = std::fs::remove_file(super::paths::sidecar(ours, suffix));
                }
                let _ = std::fs::remove_file(ours);
                Err(e)
            }
        }
    }

    /// Opens a file an earlier step of the same job created. Refuses a symlink, anything but
    /// a regular file, a file from a newer slurmwatch, and anything that is not ours.
    ///
    /// Several writers may share one file (one per step's slurmstepd), but each series must
    /// have a single writer: the delta chain of a series continues from its stored rows.
    pub fn open_existing(path: &Path) -> Result<Writer> {
        let guard = Guard::new(WRITE_CALL_BUDGET, None, "written");
        guard.call(path, || {
            let file = harden::open_file(path, true)?;
            let md = file.metadata().map_err(|e| sql_err(path, e))?;
            writable_only_by_us(path, &md)?;
            for sidecar in super::paths::SIDECARS {
                let p = super::paths::sidecar(path, sidecar);
                if let Ok(f) = open_no_block(&p) {
                    let md = f.metadata().map_err(|e| sql_err(&p, e))?;
                    if !md.is_file() {
                        return Err(sql_err(&p, "not a regular file: not opened"));
                    }
                    writable_only_by_us(&p, &md)?;
                }
            }
            let conn = open_rw(path, &file, &guard)?;
            let version = harden::check_schema(&conn, path)?;
            conn.execute_batch(schema::WAL_PRAGMA)
                .map_err(|e| db_err(path, e))?;
            let base = read_started(&conn, path)?;
            let cookie = schema_cookie(&conn, path)?;
            Ok(Writer::new(
                conn,
                file,
                path,
                base,
                version,
                guard.clone(),
                cookie,
            ))
        })
    }

    fn new(
        conn: Connection,
        file: File,
        path: &Path,
        base: i64,
        version: i64,
        guard: Guard,
        cookie: i64,
    ) -> Writer {
        Writer {
            conn,
            file,
            sidecar_files: Vec::new(),
            path: path.to_path_buf(),
            base,
            buffer: Vec::with_capacity(64),
            known_steps: Vec::new(),
            version,
            chains: HashMap::new(),
            states: HashMap::new(),
            dropped: 0,
            gpu_buffer: Vec::new(),
            output_buffer: Vec::new(),
            gpu_chains: Default::default(),
            reader: None,
            sidecars_granted: false,
            cap_bytes: None,
            capped: false,
            guard,
            schema_cookie: Cell::new(cookie),
        }
    }

    /// Runs one public call under the writer's deadline.
    fn guarded<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.guard.clone().call(&self.path, f)
    }

    /// The job's user's read grant on an existing file (a later step's writer): the file's
    /// `-wal`/`-shm` may be new. Records whether the file itself carries the grant.
    pub fn grant_reader(&mut self, uid: u32) {
        let granted = if uid == 0 || super::access::has_read_grant(&self.file, uid) {
            Ok(())
        } else {
            super::access::grant_read(&self.file, uid).map_err(|e| e.to_string())
        };
        self.reader = Some((uid, granted));
        self.sidecars_granted = false;
        self.grant_sidecars();
    }

    /// Whether the job's user can read the live file: `Err` says why not (e.g. no ACL
    /// support on the spool's filesystem), `None` when no reader was named.
    pub fn reader_grant(&self) -> Option<&std::result::Result<(), String>> {
        self.reader.as_ref().map(|(_, g)| g)
    }

    /// Grants the reader `-wal` and `-shm` once SQLite has created them. Only files that are
    /// ours (same owner as the database, not writable by anyone else) are touched.
    fn grant_sidecars(&mut self) {
        let Some((uid, Ok(()))) = self.reader else {
            return;
        };
        if self.sidecars_granted || uid == 0 {
            return;
        }
        let mut all = true;
        for sidecar in ["-wal", "-shm"] {
            let p = super::paths::sidecar(&self.path, sidecar);
            // Opened once and kept (never closed while `conn` is open: see `sidecar_files`).
            if !self.sidecar_files.iter().any(|(s, _)| *s == sidecar) {
                match open_no_block(&p) {
                    Ok(f) => self.sidecar_files.push((sidecar, f)),
                    Err(_) => {
                        all = false;
                        continue;
                    }
                }
            }
            let f = &self
                .sidecar_files
                .iter()
                .find(|(s, _)| *s == sidecar)
                .expect("kept")
                .1;
            let ok = f
                .metadata()
                .is_ok_and(|md| md.is_file() && writable_only_by_us(&p, &md).is_ok())
                && (super::access::has_read_grant(f, uid)
                    || super::access::grant_read(f, uid).is_ok());
            all &= ok;
        }
        self.sidecars_granted = all;
    }

    /// Bytes the file takes on disk now: the database and its `-wal`.
    pub fn file_bytes(&self) -> u64 {
        let db = self.file.metadata().map(|m| m.len()).unwrap_or(0);
        let wal = std::fs::symlink_metadata(super::paths::wal(&self.path))
            .map(|m| m.len())
            .unwrap_or(0);
        db + wal
    }

    /// Caps the file (database and `-wal`) at `bytes`: the first flush that finds it there
    /// drops its rows, notes one event saying recording stopped, and every later flush drops
    /// its rows too (the job runs on). Step starts/ends and events still fit in
    /// [`CAP_SLACK_BYTES`], SQLite's hard ceiling (`max_page_count`) above the cap.
    pub fn set_cap(&mut self, bytes: u64) -> Result<()> {
        let page: i64 = self
            .conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(|e| db_err(&self.path, e))?;
        let pages = ((bytes + CAP_SLACK_BYTES) / page.max(512) as u64).max(1);
        self.conn
            .query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))
            .map_err(|e| db_err(&self.path, e))?;
        self.cap_bytes = Some(bytes);
        Ok(())
    }

    /// Whether the cap was reached: nothing more is stored.
    pub fn capped(&self) -> bool {
        self.capped
    }

    /// Checks the cap before a flush; true when the rows must be dropped.
    fn over_cap(&mut self, t_unix_ms: i64) -> bool {
        let Some(cap) = self.cap_bytes else {
            return false;
        };
        if !self.capped && self.file_bytes() >= cap {
            self.capped = true;
            let why = format!(
                "recording stopped: the file reached the site's cap of {} KiB (max_file_mb); the job runs on",
                cap >> 10
            );
            let _ = insert_event(&self.conn, &self.path, t_unix_ms, None, "problem", &why);
        }
        self.capped
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor opened at creation (for `fchown`/`fstat` by the caller).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// One value of the `meta` table (e.g. `uid`, `incarnation`), `None` if absent.
    pub fn meta_value(&self, key: &str) -> Result<Option<String>> {
        self.guarded(|| {
            use rusqlite::OptionalExtension;
            self.conn
                .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .optional()
                .map_err(|e| db_err(&self.path, e))
        })
    }

    /// Whether a periodic row of `step` at `t_unix_ms` would be stored, judged by the steps
    /// table as of the last flush (see [`step_row_is_redundant`]): lets the sampler skip the
    /// full read of a step whose row would be dropped. Unknown steps are wanted.
    pub fn step_row_wanted(&self, step: &str, t_unix_ms: i64) -> bool {
        !step_row_is_redundant(step, t_unix_ms, &self.known_steps)
    }

    /// Whether `step` (already begun) writes this node's job series: see
    /// [`claims_job_series`](super::claims_job_series). Reads the steps table now.
    pub fn claims_job_series(&self, step: &str) -> Result<bool> {
        self.guarded(|| Ok(super::claims_job_series(step, &self.steps()?)))
    }

    /// The steps table now.
    pub fn steps(&self) -> Result<Vec<StepInfo>> {
        self.guarded(|| {
            Ok(super::reader::load_steps(&self.conn, &self.path)?
                .into_iter()
                .map(|(_, s)| s)
                .collect())
        })
    }

    /// Whether the batch or interactive step — the writer of the job series — is running
    /// at `t_unix_ms` (steps table as of the last flush).
    pub fn has_job_series_writer(&self, t_unix_ms: i64) -> bool {
        self.known_steps.iter().any(|s| {
            super::is_job_series_step(&s.step)
                && s.started_unix_ms.is_some_and(|a| a <= t_unix_ms)
                && s.ended_unix_ms.is_none_or(|e| t_unix_ms <= e)
        })
    }

    /// Rows waiting for the next [`flush`](Self::flush).
    pub fn buffered(&self) -> usize {
        self.buffer.len() + self.gpu_buffer.len()
    }

    /// Records the job's cards (once each, by UUID) and how they are wired, for `step`.
    /// Returns each card's `gpus.id`, and whether this step records it (the first step to
    /// register a card owns it; another step's cards are not recorded twice).
    pub fn register_gpus(
        &mut self,
        step: &str,
        t_unix_ms: i64,
        cards: &[crate::sample::GpuCard],
        links: &[crate::sample::GpuLink],
    ) -> Result<Vec<(i64, bool)>> {
        self.guard.clone().call(&self.path.clone(), || {
            let path = &self.path;
            let tx = write_transaction(&mut self.conn, path)?;
            schema_unchanged(&tx, path, &self.schema_cookie)?;
            let ids = super::gpu::register(&tx, path, step, t_unix_ms, cards, links)?;
            tx.commit().map_err(|e| db_err(path, e))?;
            Ok(ids)
        })
    }

    /// Buffers one card's reading (written with the next [`flush`](Self::flush)).
    pub fn push_gpu(&mut self, t_unix_ms: i64, gpu_id: i64, sample: crate::sample::GpuSample) {
        if self.gpu_buffer.len() >= MAX_BUFFERED_ROWS * 8 {
            self.gpu_buffer.remove(0);
            self.dropped += 1;
        }
        self.gpu_buffer.push((t_unix_ms, gpu_id, sample));
    }

    /// Buffers a row; no I/O. Call [`flush`](Self::flush) every few rows or seconds.
    pub fn push(&mut self, row: SampleRow) {
        if self.buffer.len() >= MAX_BUFFERED_ROWS {
            self.buffer.remove(0);
            self.dropped += 1;
        }
        self.buffer.push(row);
    }

    /// Writes the buffered rows in one transaction. On error nothing is written and the rows
    /// stay buffered for the next try.
    pub fn flush(&mut self) -> Result<()> {
        self.grant_sidecars();
        self.guard
            .clone()
            .call(&self.path.clone(), || self.flush_guarded())
    }

    /// [`flush`](Self::flush) under its deadline. The codec state and steps table are worked
    /// on as copies, kept only once the transaction commits: a failed flush leaves them as
    /// the file has them.
    fn flush_guarded(&mut self) -> Result<()> {
        if self.buffer.is_empty()
            && self.gpu_buffer.is_empty()
            && self.output_buffer.is_empty()
            && self.dropped == 0
        {
            return Ok(());
        }
        let t = self.buffer.first().map_or(self.base, |r| r.t_unix_ms);
        if self.over_cap(t) {
            self.buffer.clear();
            self.gpu_buffer.clear();
            self.output_buffer.clear();
            self.dropped = 0;
            return Ok(());
        }
        let path = &self.path;
        let tx = write_transaction(&mut self.conn, path)?;
        schema_unchanged(&tx, path, &self.schema_cookie)?;
        let base = self.base;
        let (mut ids, mut infos): (Vec<i64>, Vec<StepInfo>) =
            load_steps(&tx, path)?.into_iter().unzip();
        let mut chains = self.chains.clone();
        let mut states = self.states.clone();
        let mut gpu_chains = self.gpu_chains.clone();
        let v1 = self.version == 1;
        {
            let mut inserts = rows::SampleInserts::prepare(&tx, path, base, self.version)?;
            for row in &self.buffer {
                let Some(series) = rows::series_of(&tx, path, row, &mut ids, &mut infos)? else {
                    continue;
                };
                if v1 {
                    inserts.insert_v1(row, series, &mut chains)?;
                } else {
                    inserts.insert_v2(row, series, &mut states)?;
                }
            }
            super::gpu::insert_rows(
                &tx,
                path,
                (base, self.version),
                &mut gpu_chains,
                &self.gpu_buffer,
            )?;
            output_sizes::insert(&tx, path, &self.output_buffer)?;
            if self.dropped > 0 {
                let now = self.buffer.last().map_or(base, |r| r.t_unix_ms);
                tx.execute(
                    "INSERT INTO events(t_unix_ms, step, kind, detail) VALUES (?1, NULL, 'rows_dropped', ?2)",
                    params![now, format!("{} samples dropped: the file could not be written", self.dropped)],
                )
                .map_err(|e| db_err(path, e))?;
            }
        }
        tx.commit().map_err(|e| db_err(path, e))?;
        self.chains = chains;
        self.states = states;
        self.gpu_chains = gpu_chains;
        self.known_steps = infos;
        self.buffer.clear();
        self.gpu_buffer.clear();
        self.output_buffer.clear();
        self.dropped = 0;
        Ok(())
    }

    /// Buffers the size of the job's output file (`fd` 1 or 2) at a stored row, for the
    /// next flush. A file of schema 3 or older has no table for it: nothing is kept.
    pub fn push_output_size(&mut self, size: OutputSize) {
        if self.version >= 4 && self.output_buffer.len() < MAX_BUFFERED_OUTPUT_SIZES {
            self.output_buffer.push(size);
        }
    }

    /// Records that a step started on this node (and an event).
    pub fn begin_step(&mut self, step: &str, t_unix_ms: i64, tasks: Option<u32>) -> Result<()> {
        self.guard.clone().call(&self.path.clone(), || {
            let path = &self.path;
            let tx = write_transaction(&mut self.conn, path)?;
            schema_unchanged(&tx, path, &self.schema_cookie)?;
            tx.execute(
                "INSERT INTO steps(step, started_unix_ms, tasks) VALUES (?1, ?2, ?3)
             ON CONFLICT(step) DO UPDATE SET
               started_unix_ms = COALESCE(MIN(steps.started_unix_ms, excluded.started_unix_ms),
                                          excluded.started_unix_ms),
               tasks = COALESCE(excluded.tasks, steps.tasks)",
                params![step, t_unix_ms, tasks],
            )
            .map_err(|e| db_err(path, e))?;
            let detail = tasks.map_or(String::new(), |n| format!("tasks={n}"));
            insert_event(&tx, path, t_unix_ms, Some(step), "step_start", &detail)?;
            tx.commit().map_err(|e| db_err(path, e))
        })
    }

    /// Records that a step ended (and an event).
    pub fn end_step(&mut self, step: &str, t_unix_ms: i64, exit_status: Option<i32>) -> Result<()> {
        self.guard.clone().call(&self.path.clone(), || {
            let path = &self.path;
            let tx = write_transaction(&mut self.conn, path)?;
            schema_unchanged(&tx, path, &self.schema_cookie)?;
            tx.execute(
                "INSERT INTO steps(step, ended_unix_ms, exit_status) VALUES (?1, ?2, ?3)
             ON CONFLICT(step) DO UPDATE SET
               ended_unix_ms = excluded.ended_unix_ms,
               exit_status = COALESCE(excluded.exit_status, steps.exit_status)",
                params![step, t_unix_ms, exit_status],
            )
            .map_err(|e| db_err(path, e))?;
            let detail = exit_status.map_or(String::new(), |s| format!("exit_status={s}"));
            insert_event(&tx, path, t_unix_ms, Some(step), "step_end", &detail)?;
            tx.commit().map_err(|e| db_err(path, e))
        })
    }

    /// Appends an event (OOM kill, sampler error, ...) immediately.
    pub fn event(
        &mut self,
        t_unix_ms: i64,
        step: Option<&str>,
        kind: &str,
        detail: &str,
    ) -> Result<()> {
        self.guarded(|| {
            schema_unchanged(&self.conn, &self.path, &self.schema_cookie)?;
            insert_event(&self.conn, &self.path, t_unix_ms, step, kind, detail)
        })
    }

    /// Flushes, then writes a consistent, compacted copy of the file to `dest`, which must not
    /// exist or be empty (`VACUUM INTO`). The copy is in rollback-journal mode: a single,
    /// self-contained file.
    pub fn backup_to(&mut self, dest: &Path) -> Result<()> {
        self.guard.clone().call(&self.path.clone(), || {
            self.flush()?;
            super::archive::vacuum_into(&self.conn, &self.path, dest)
        })
    }

    /// A consistent copy of the file for the archive, made through this writer's own
    /// connection (see [`archive::snapshot`](super::archive::snapshot): opening the file
    /// again by name in this process would cost the writer its locks).
    pub fn snapshot(&self, scratch_dir: &Path, job_id: u32) -> Result<File> {
        self.guarded(|| super::archive::snapshot_of(&self.conn, &self.path, scratch_dir, job_id))
    }

    /// Flushes, checkpoints, and — when no other writer has the file open — switches it back
    /// to a single self-contained file (rollback journal), so it can be read from a directory
    /// the reader cannot write to.
    pub fn close(mut self) -> Result<()> {
        self.guard.clone().call(&self.path.clone(), || {
            self.flush()?;
            let _ = self.conn.busy_timeout(Duration::ZERO);
            let _ = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
            let _ = self
                .conn
                .query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()));
            Ok(())
        })
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// Opens for reading without following a symlink or blocking on a FIFO.
fn open_no_block(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

/// A writer only opens files that no one else can write: owned by this process's user and
/// without group/other write (with an ACL the group bits are its mask, so no named entry can
/// grant write either). A file the job's user owns or can write is refused (docs/design.md §7).
fn writable_only_by_us(path: &Path, md: &std::fs::Metadata) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if md.uid() != euid || md.mode() & 0o022 != 0 {
        return Err(sql_err(
            path,
            format!(
                "owned by uid {} with mode {:o}: another user can write it, so it is not opened",
                md.uid(),
                md.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

fn schema_cookie(conn: &Connection, path: &Path) -> Result<i64> {
    // Cached: it runs before every flush.
    conn.prepare_cached("PRAGMA schema_version")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(|e| db_err(path, e))
}

/// The schema as checked at open (or as we created it): if anyone changed it since (a user
/// rewriting a file they can write, during the job), it is checked again before we write, so
/// no trigger or view planted later ever runs in our statements.
fn schema_unchanged(conn: &Connection, path: &Path, cookie: &Cell<i64>) -> Result<()> {
    let now = schema_cookie(conn, path)?;
    if now != cookie.get() {
        harden::check_schema(conn, path)?;
        cookie.set(now);
    }
    Ok(())
}

/// A transaction that takes the write lock at `BEGIN` (`IMMEDIATE`), waiting its turn up to
/// [`BUSY_TIMEOUT`]. Every writer transaction reads (the schema cookie, the steps) before it
/// writes; a deferred one would hold a read snapshot, and once another step's writer had
/// committed, SQLite answers its first write "database is locked" at once instead of
/// waiting (the snapshot is stale).
fn write_transaction<'c>(
    conn: &'c mut Connection,
    path: &Path,
) -> Result<rusqlite::Transaction<'c>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| db_err(path, e))
}

/// `rename(from, to)` that fails with `EEXIST` rather than replace `to`: `renameat2`'s
/// `RENAME_NOREPLACE`, or on a filesystem without it, `link` (which never replaces) and
/// `unlink`.
fn rename_no_replace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (from_c, to_c) = (c(from)?, c(to)?);
    // SAFETY: both are NUL-terminated paths that outlive the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from_c.as_ptr(),
            libc::AT_FDCWD,
            to_c.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EINVAL) {
        return Err(e);
    }
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

/// A hardened read-write connection on the inode `file` holds (see `harden`).
fn open_rw(path: &Path, file: &File, guard: &Guard) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| db_err(path, e))?;
    harden::configure(&conn, guard).map_err(|e| db_err(path, e))?;
    harden::same_inode(path, file)?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| db_err(path, e))?;
    conn.execute_batch(schema::WRITER_PRAGMAS)
        .map_err(|e| db_err(path, e))?;
    Ok(conn)
}

fn meta_sql(m: &JobMeta) -> String {
    let q = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let mut kv: Vec<(&str, String)> = vec![
        ("job_id", m.job_id.to_string()),
        ("user", m.user.clone()),
        ("uid", m.uid.to_string()),
        ("node", m.node.clone()),
        ("plugin_version", m.plugin_version.clone()),
        ("interval_seconds", m.interval_seconds.to_string()),
        ("source", m.source.as_str().to_string()),
        ("started_unix_ms", m.started_unix_ms.to_string()),
    ];
    if let Some(c) = &m.cluster {
        kv.push(("cluster", c.clone()));
    }
    if let Some(i) = &m.incarnation {
        kv.push(("incarnation", i.clone()));
    }
    if let Some(c) = m.cores_allocated {
        kv.push(("cores_allocated", c.to_string()));
    }
    if let Some(b) = m.memory_allocated_bytes {
        kv.push(("memory_allocated_bytes", b.to_string()));
    }
    kv.iter()
        .map(|(k, v)| {
            format!(
                "INSERT INTO meta(key, value) VALUES ({}, {});\n",
                q(k),
                q(v)
            )
        })
        .collect()
}

fn insert_event(
    conn: &Connection,
    path: &Path,
    t_unix_ms: i64,
    step: Option<&str>,
    kind: &str,
    detail: &str,
) -> Result<()> {
    conn.execute(
        "INSERT INTO events(t_unix_ms, step, kind, detail) VALUES (?1, ?2, ?3, ?4)",
        params![t_unix_ms, step, kind, detail],
    )
    .map(|_| ())
    .map_err(|e| db_err(path, e))
}
