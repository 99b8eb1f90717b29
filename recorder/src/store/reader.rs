//! The epilog's and the CLI's side: open a job's file read-only and decode it.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::codec::{decode, Chain, State2, Sums2, Values};
use super::fault::{db_err, sql_err};
use super::harden::{self, Deadline, Guard, READ_CALL_BUDGET};
use super::schema::{self, Enc, NVALUES, VALUE_COLUMNS};
use super::{step_row_is_redundant, Event, JobMeta, StepInfo};
use crate::error::Result;
use crate::model::{SampleKind, SampleRow, Series};
use crate::sample::Source;

pub struct Reader {
    conn: Connection,
    path: PathBuf,
    started_unix_ms: i64,
    /// `PRAGMA user_version`: 1 to 4 (see `schema`).
    version: i64,
    guard: Guard,
    /// Root reading another user's file reads a private copy of it (`private_copy`), kept
    /// until the reader is dropped.
    _copy: Option<super::private_copy::PrivateCopy>,
}

/// The decoding state of one series, per schema version.
enum Dec {
    V1(Box<Chain>),
    V2(Box<State2>),
}

/// One series decoded so far: its rows, and where its decoder stopped.
struct Tail {
    /// `steps.id`; 0 is the job series.
    id: i64,
    /// The rowid the next row of the series will have at least.
    next_rowid: i64,
    dec: Dec,
    rows: Vec<SampleRow>,
}

/// A series followed as its file grows: made by [`Reader::following`], brought up to date
/// by [`Reader::follow`]. Holds what it decoded (and, for a step, the job series it is
/// filled from), so a refresh decodes only what is new.
pub struct Following {
    series: Series,
    job: Tail,
    /// A step's own series, once the step is in the file.
    own: Option<Tail>,
    /// A step's rows as [`Reader::samples`] gives them (its own, filled from the job's).
    step_rows: Vec<SampleRow>,
}

impl Following {
    /// The rows as of the last [`Reader::follow`].
    pub fn rows(&self) -> &[SampleRow] {
        match self.series {
            Series::Job => &self.job.rows,
            Series::Step(_) => &self.step_rows,
        }
    }

    pub fn series(&self) -> &Series {
        &self.series
    }
}

impl Reader {
    /// Opens a job's file read-only (`SQLITE_OPEN_READ_ONLY`: the file is never modified),
    /// hardened (see `harden`: a symlink, FIFO, oversized file or a schema that is not
    /// slurmwatch's is refused before anything in it runs). A file that is not SQLite, is
    /// truncated, is not slurmwatch's or comes from a newer slurmwatch gets one clear error.
    /// Each call on the reader then has [`READ_CALL_BUDGET`] to finish.
    pub fn open(path: &Path) -> Result<Reader> {
        Self::open_with(path, None)
    }

    /// As [`open`](Self::open), and the open and every later call end by `deadline` (e.g. the
    /// epilog's bound for the whole summary).
    pub fn open_until(path: &Path, deadline: Deadline) -> Result<Reader> {
        Self::open_with(path, Some(deadline))
    }

    fn open_with(path: &Path, deadline: Option<Deadline>) -> Result<Reader> {
        let guard = Guard::new(READ_CALL_BUDGET, deadline, "read");
        guard.call(path, || {
            let f = harden::open_file(path, false)?;
            // Root never lets SQLite open by name, or map the `-shm` of, a file another user
            // can write: it reads a copy of the bytes it checked (module `private_copy`).
            let copy = if super::private_copy::needed(path, &f) {
                Some(super::private_copy::make(path, &f)?)
            } else {
                None
            };
            let (sqlite_path, checked) = match &copy {
                Some(c) => (c.db.as_path(), &c.file),
                None => (path, &f),
            };
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_NOFOLLOW;
            let open = |p: &Path, flags: OpenFlags| -> rusqlite::Result<Connection> {
                let c = Connection::open_with_flags(p, flags)?;
                harden::configure(&c, &guard)?;
                c.query_row("PRAGMA schema_version", [], |_| Ok(()))?;
                Ok(c)
            };
            let conn = match open(sqlite_path, flags) {
                Ok(c) => c,
                // A finished file left in WAL mode, in a directory we cannot write: SQLite
                // cannot create the `-shm` it wants. With no `-wal` beside it nothing is
                // uncommitted, so reading it as immutable is exact.
                Err(e)
                    if e.sqlite_error_code() == Some(ErrorCode::CannotOpen)
                        && !wal_exists(sqlite_path) =>
                {
                    open(
                        Path::new(&immutable_uri(sqlite_path)),
                        flags | OpenFlags::SQLITE_OPEN_URI,
                    )
                    .map_err(|e| db_err(path, e))?
                }
                Err(e) => return Err(db_err(path, e)),
            };
            harden::same_inode(sqlite_path, checked)?;
            conn.execute_batch(schema::READER_PRAGMAS)
                .map_err(|e| db_err(path, e))?;
            let version = harden::check_schema(&conn, path)?;
            let started_unix_ms = read_started(&conn, path)?;
            Ok(Reader {
                conn,
                path: path.to_path_buf(),
                started_unix_ms,
                version,
                guard: guard.clone(),
                _copy: copy,
            })
        })
    }

    /// Runs one public call under this reader's deadline.
    pub(crate) fn guarded<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.guard.call(&self.path, f)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn meta(&self) -> Result<JobMeta> {
        self.guarded(|| {
            let mut stmt = self
                .conn
                .prepare("SELECT key, value FROM meta")
                .map_err(|e| db_err(&self.path, e))?;
            let pairs: Vec<(String, String)> = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .and_then(|rows| rows.collect())
                .map_err(|e| db_err(&self.path, e))?;
            let get = |k: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.as_str())
            };
            let need =
                |k: &str| get(k).ok_or_else(|| sql_err(&self.path, format!("meta has no '{k}'")));
            fn num<T: std::str::FromStr>(path: &Path, k: &str, v: &str) -> Result<T> {
                v.parse()
                    .map_err(|_| sql_err(path, format!("meta '{k}' is not a number: {v:?}")))
            }
            let p = &self.path;
            let opt_num =
                |k: &str| -> Result<Option<u64>> { get(k).map(|v| num(p, k, v)).transpose() };
            Ok(JobMeta {
                job_id: num(p, "job_id", need("job_id")?)?,
                user: need("user")?.to_string(),
                uid: num(p, "uid", need("uid")?)?,
                node: need("node")?.to_string(),
                cluster: get("cluster").map(str::to_string),
                plugin_version: need("plugin_version")?.to_string(),
                interval_seconds: num(p, "interval_seconds", need("interval_seconds")?)?,
                source: Source::parse(need("source")?)
                    .ok_or_else(|| sql_err(p, "meta 'source' is not a known source"))?,
                cores_allocated: get("cores_allocated")
                    .map(|v| num(p, "cores_allocated", v))
                    .transpose()?,
                memory_allocated_bytes: opt_num("memory_allocated_bytes")?,
                started_unix_ms: self.started_unix_ms,
                incarnation: get("incarnation").map(str::to_string),
            })
        })
    }

    fn has_table(&self, name: &str) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [name],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)
            .map_err(|e| db_err(&self.path, e))
    }

    /// The job's cards recorded on this node, in `cuda:N` order (empty: no GPU section).
    pub fn gpus(&self) -> Result<Vec<super::StoredGpu>> {
        self.guarded(|| {
            if !self.has_table("gpus")? {
                return Ok(Vec::new());
            }
            super::gpu::load_gpus(&self.conn, &self.path)
        })
    }

    /// How each pair of the job's cards is wired (NVLink or the PCIe common ancestor).
    pub fn gpu_links(&self) -> Result<Vec<crate::sample::GpuLink>> {
        self.guarded(|| {
            if !self.has_table("gpu_links")? {
                return Ok(Vec::new());
            }
            super::gpu::load_links(&self.conn, &self.path)
        })
    }

    /// Card `gpu_id`'s critical Xid events, oldest first: (time of the reading that saw it,
    /// code). At most `max`, the latest.
    pub fn gpu_xids(&self, gpu_id: i64, max: u32) -> Result<Vec<(i64, u64)>> {
        self.guarded(|| {
            if !self.has_table("gpu_xid")? {
                return Ok(Vec::new());
            }
            let mut st = self
            .conn
            .prepare_cached(
                "SELECT t_unix_ms, xid FROM gpu_xid WHERE gpu = ?1 ORDER BY rowid DESC LIMIT ?2",
            )
            .map_err(|e| db_err(&self.path, e))?;
            let mut v: Vec<(i64, u64)> = st
                .query_map(rusqlite::params![gpu_id, max], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?.max(0) as u64))
                })
                .and_then(|rows| rows.collect())
                .map_err(|e| db_err(&self.path, e))?;
            v.reverse();
            Ok(v)
        })
    }

    /// Every reading of card `gpu_id` (`StoredGpu::id`), oldest first.
    pub fn gpu_samples(&self, gpu_id: i64) -> Result<Vec<super::GpuRow>> {
        self.guarded(|| {
            if !self.has_table("gpu_samples")? {
                return Ok(Vec::new());
            }
            super::gpu::load_samples(
                &self.conn,
                &self.path,
                (self.started_unix_ms, self.version),
                gpu_id,
                None,
            )
        })
    }

    /// The last `n` readings of card `gpu_id`, oldest first (a live view's rates).
    pub fn gpu_last(&self, gpu_id: i64, n: u32) -> Result<Vec<super::GpuRow>> {
        self.guarded(|| {
            if !self.has_table("gpu_samples")? {
                return Ok(Vec::new());
            }
            super::gpu::load_samples(
                &self.conn,
                &self.path,
                (self.started_unix_ms, self.version),
                gpu_id,
                Some(n),
            )
        })
    }

    /// The steps seen on this node, in the order they were first recorded.
    pub fn steps(&self) -> Result<Vec<StepInfo>> {
        self.guarded(|| {
            Ok(load_steps(&self.conn, &self.path)?
                .into_iter()
                .map(|(_, s)| s)
                .collect())
        })
    }

    /// The series with data in this file: the job, then each step.
    pub fn series(&self) -> Result<Vec<Series>> {
        self.guarded(|| {
            let mut out = vec![Series::Job];
            out.extend(self.steps()?.into_iter().map(|s| Series::Step(s.step)));
            Ok(out)
        })
    }

    /// The output file's sizes noted at stored rows (`fd` 1 stdout, 2 stderr), oldest first;
    /// none in a file before schema 4.
    pub fn output_sizes(&self, fd: u8) -> Result<Vec<super::OutputSize>> {
        self.guarded(|| super::output::read(&self.conn, &self.path, self.version, fd))
    }

    pub fn events(&self) -> Result<Vec<Event>> {
        self.guarded(|| {
            let mut stmt = self
                .conn
                .prepare("SELECT t_unix_ms, step, kind, detail FROM events ORDER BY rowid")
                .map_err(|e| db_err(&self.path, e))?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(Event {
                        t_unix_ms: r.get(0)?,
                        step: r.get(1)?,
                        kind: r.get(2)?,
                        detail: r.get(3)?,
                    })
                })
                .and_then(|rows| rows.collect())
                .map_err(|e| db_err(&self.path, e));
            rows
        })
    }

    /// Every row of a series, oldest first, decoded. For a step, the periodic rows that were
    /// not stored because the step was the job's only step at the time (see `schema`) are
    /// filled in from the job's rows, relabelled as the step. An unknown step yields no rows.
    pub fn samples(&self, series: &Series) -> Result<Vec<SampleRow>> {
        self.guarded(|| {
            let name = match series {
                Series::Job => return self.decode_series(0, series),
                Series::Step(name) => name,
            };
            let steps = load_steps(&self.conn, &self.path)?;
            let Some((id, me)) = steps.iter().find(|(_, s)| &s.step == name) else {
                return Ok(Vec::new());
            };
            let infos: Vec<StepInfo> = steps.iter().map(|(_, s)| s.clone()).collect();
            let rows = self.decode_series(*id, series)?;
            let job = match me.started_unix_ms {
                Some(_) => self.decode_series(0, &Series::Job)?,
                None => Vec::new(),
            };
            Ok(step_rows(rows, me, &infos, JobRows::new(&job)))
        })
    }

    /// Every step's rows, each as [`samples`](Self::samples) gives them, in one pass over the
    /// file and with the job series decoded once: `job_rows` is this file's
    /// `samples(&Series::Job)`. Asking `samples` step by step reads the whole table for each
    /// step (the file keeps no index by series: it would cost a quarter of its size) and
    /// decodes the job series again: a week-long job with 200 steps took minutes. Only the
    /// steps `wanted` names are decoded and returned, in the steps table's order.
    pub fn step_samples(
        &self,
        job_rows: &[SampleRow],
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Vec<(String, Vec<SampleRow>)>> {
        self.guarded(|| {
            let steps = load_steps(&self.conn, &self.path)?;
            let infos: Vec<StepInfo> = steps.iter().map(|(_, s)| s.clone()).collect();
            let job = JobRows::new(job_rows);
            let chosen: Vec<&(i64, StepInfo)> =
                steps.iter().filter(|(_, s)| wanted(&s.step)).collect();
            let mut decoded = self.decode_steps(&chosen)?;
            Ok(chosen
                .iter()
                .map(|(id, me)| {
                    let rows = decoded.remove(id).unwrap_or_default();
                    (me.step.clone(), step_rows(rows, me, &infos, job))
                })
                .collect())
        })
    }

    /// The latest row stored for `series` (a step's own rows only, without the job rows that
    /// [`samples`](Self::samples) fills in), from the series' sums: what an exporter needs at
    /// every scrape of a long job without decoding whole series. `None`: no row yet.
    pub fn last_stored(&self, series: &Series) -> Result<Option<SampleRow>> {
        self.guarded(|| {
            let id = match series {
                Series::Job => 0,
                Series::Step(name) => match load_steps(&self.conn, &self.path)?
                    .into_iter()
                    .find(|(_, s)| &s.step == name)
                {
                    Some((id, _)) => id,
                    None => return Ok(None),
                },
            };
            Ok(self.tail(id, series, i64::MAX, 1)?.pop())
        })
    }

    /// The last `k` rows of series `id` with time ≤ `max_t_unix_ms`, decoded: the sums over
    /// the rows before them seed the delta chain.
    fn tail(&self, id: i64, series: &Series, max_t_unix_ms: i64, k: i64) -> Result<Vec<SampleRow>> {
        let e = |e| db_err(&self.path, e);
        let max_t_ms = max_t_unix_ms.saturating_sub(self.started_unix_ms);
        let start = if self.version == 1 {
            let first: Option<i64> = self
                .conn
                .query_row(
                    "SELECT MIN(r) FROM (SELECT rowid AS r FROM samples_packed
                     WHERE series = ?1 AND t_ms <= ?2 ORDER BY rowid DESC LIMIT ?3)",
                    rusqlite::params![id, max_t_ms, k],
                    |r| r.get(0),
                )
                .map_err(e)?;
            match first {
                None => None,
                Some(first) => {
                    let sums: Vec<String> = VALUE_COLUMNS[..schema::nvalues_in(1)]
                        .iter()
                        .map(|(c, _, _)| format!("SUM({c})"))
                        .collect();
                    let mut v: Values = [None; NVALUES];
                    self.conn
                        .query_row(
                            &format!(
                                "SELECT {} FROM samples_packed WHERE series = ?1 AND rowid < ?2",
                                sums.join(", ")
                            ),
                            [id, first],
                            |r| {
                                for (i, slot) in v.iter_mut().enumerate() {
                                    *slot = r.get(i)?;
                                }
                                Ok(())
                            },
                        )
                        .map_err(e)?;
                    Some((first, Dec::V1(Box::new(Chain::from_sums(v)))))
                }
            }
        } else {
            tail_start2(&self.conn, &self.path, self.version, id, max_t_ms, k)?
                .map(|(first, state)| (first, Dec::V2(Box::new(state))))
        };
        let Some((first, dec)) = start else {
            return Ok(Vec::new());
        };
        // Every later row advances the chain, even one past `max_t` (a clock that stepped back).
        let mut out = self.decode_from(id, series, first, dec)?;
        out.retain(|r| r.t_unix_ms <= max_t_unix_ms);
        let keep = out.len().saturating_sub(k as usize);
        out.drain(..keep);
        Ok(out)
    }

    /// Decodes the rows of series `id` from `rowid >= first` on, continuing `dec`.
    fn decode_from(
        &self,
        id: i64,
        series: &Series,
        first: i64,
        dec: Dec,
    ) -> Result<Vec<SampleRow>> {
        let mut tail = Tail {
            id,
            next_rowid: first,
            dec,
            rows: Vec::new(),
        };
        self.decode_more(series, &mut tail)?;
        Ok(tail.rows)
    }

    /// Appends to `tail` the rows of its series stored after the ones it holds. Its rowid and
    /// decoder move row by row, so an error leaves it consistent with the rows it kept.
    fn decode_more(&self, series: &Series, tail: &mut Tail) -> Result<()> {
        let e = |e| db_err(&self.path, e);
        let mut stmt = self
            .conn
            .prepare_cached(&schema::select_series_sql(self.version))
            .map_err(e)?;
        let mut q = stmt.query([tail.id, tail.next_rowid]).map_err(e)?;
        while let Some(r) = q.next().map_err(e)? {
            let rowid: i64 = r.get(r.as_ref().column_count() - 1).map_err(e)?;
            let row = self.decode_row(r, &mut tail.dec, series).map_err(e)?;
            tail.rows.extend(row);
            tail.next_rowid = rowid.saturating_add(1);
        }
        Ok(())
    }

    /// A fresh decoder for this file's schema.
    fn new_dec(&self) -> Dec {
        if self.version == 1 {
            Dec::V1(Box::default())
        } else {
            Dec::V2(Box::new(State2::new()))
        }
    }

    /// Starts following `series`: nothing is read until [`follow`](Self::follow).
    pub fn following(&self, series: &Series) -> Following {
        Following {
            series: series.clone(),
            job: self.new_tail(0),
            own: None,
            step_rows: Vec::new(),
        }
    }

    fn new_tail(&self, id: i64) -> Tail {
        Tail {
            id,
            next_rowid: i64::MIN,
            dec: self.new_dec(),
            rows: Vec::new(),
        }
    }

    /// The followed series' rows, as [`samples`](Self::samples) gives them now, decoding only
    /// the rows stored since the last call (the live view refreshes a week-long job every few
    /// seconds: decoding it whole took ~0.2 s each time). Samples are only ever appended
    /// (implicit rowids; the writer never updates or deletes one), so the rows past the kept
    /// rowid are exactly the new ones.
    pub fn follow<'f>(&self, f: &'f mut Following) -> Result<&'f [SampleRow]> {
        self.guarded(|| {
            let name = match &f.series {
                Series::Job => {
                    self.decode_more(&Series::Job, &mut f.job)?;
                    return Ok(());
                }
                Series::Step(name) => name.clone(),
            };
            let steps = load_steps(&self.conn, &self.path)?;
            let Some((id, me)) = steps.iter().find(|(_, s)| s.step == name) else {
                f.step_rows.clear();
                return Ok(());
            };
            let own = f.own.get_or_insert_with(|| self.new_tail(*id));
            self.decode_more(&f.series, own)?;
            if me.started_unix_ms.is_some() {
                self.decode_more(&Series::Job, &mut f.job)?;
            }
            let infos: Vec<StepInfo> = steps.iter().map(|(_, s)| s.clone()).collect();
            f.step_rows = step_rows(own.rows.clone(), me, &infos, JobRows::new(&f.job.rows));
            Ok(())
        })?;
        Ok(f.rows())
    }

    /// These steps' series (never the job's) in one pass over the table, by `steps.id`.
    fn decode_steps(
        &self,
        steps: &[&(i64, StepInfo)],
    ) -> Result<std::collections::HashMap<i64, Vec<SampleRow>>> {
        let e = |e| db_err(&self.path, e);
        let mut decoding: std::collections::HashMap<i64, (Series, Dec, Vec<SampleRow>)> = steps
            .iter()
            .map(|(id, s)| {
                (
                    *id,
                    (Series::Step(s.step.clone()), self.new_dec(), Vec::new()),
                )
            })
            .collect();
        let mut stmt = self
            .conn
            .prepare_cached(&schema::select_steps_sql(self.version))
            .map_err(e)?;
        let mut q = stmt.query([]).map_err(e)?;
        while let Some(r) = q.next().map_err(e)? {
            let id: i64 = r.get(r.as_ref().column_count() - 1).map_err(e)?;
            // Rows of a step not asked for, or of a series no step names, are skipped.
            if let Some((series, dec, out)) = decoding.get_mut(&id) {
                out.extend(self.decode_row(r, dec, series).map_err(e)?);
            }
        }
        Ok(decoding
            .into_iter()
            .map(|(id, (_, _, rows))| (id, rows))
            .collect())
    }

    /// One stored row of `series`, undone by its series' decoder: `None` for a row of an
    /// unknown kind (it cannot come from a known schema version; the chain is kept).
    fn decode_row(
        &self,
        r: &rusqlite::Row<'_>,
        dec: &mut Dec,
        series: &Series,
    ) -> rusqlite::Result<Option<SampleRow>> {
        let t: i64 = r.get(0)?;
        let kind: i64 = r.get(1)?;
        let (t_ms, abs) = match dec {
            Dec::V1(chain) => {
                let mut v: Values = [None; NVALUES];
                for (i, slot) in v[..schema::nvalues_in(1)].iter_mut().enumerate() {
                    *slot = r.get(i + 2)?;
                }
                (t, chain.undelta(&v))
            }
            Dec::V2(state) => {
                let (_, _, rare, v, _) = row2(r, self.version)?;
                state.decode(t, &v, rare)
            }
        };
        Ok(super::kind_from_code(kind)
            .map(|kind| decode(self.started_unix_ms + t_ms, series.clone(), kind, &abs)))
    }

    fn decode_series(&self, id: i64, series: &Series) -> Result<Vec<SampleRow>> {
        self.decode_from(id, series, i64::MIN, self.new_dec())
    }
}

/// One step's stored rows, with the job series' periodic rows that stand for it (it ran
/// alone then: [`step_row_is_redundant`]), in time order.
fn step_rows(
    mut rows: Vec<SampleRow>,
    me: &StepInfo,
    infos: &[StepInfo],
    job: JobRows<'_>,
) -> Vec<SampleRow> {
    let series = Series::Step(me.step.clone());
    let Some(start) = me.started_unix_ms else {
        return rows;
    };
    let end = me.ended_unix_ms.unwrap_or(i64::MAX);
    let stored: std::collections::HashSet<i64> = rows.iter().map(|r| r.t_unix_ms).collect();
    let before = rows.len();
    for job_row in job.within(start, end) {
        let t = job_row.t_unix_ms;
        if job_row.kind == SampleKind::Periodic
            && (start..=end).contains(&t)
            && !stored.contains(&t)
            && step_row_is_redundant(&me.step, t, infos)
        {
            rows.push(SampleRow {
                series: series.clone(),
                ..job_row.clone()
            });
        }
    }
    if rows.len() != before {
        rows.sort_by_key(|r| r.t_unix_ms); // stable: equal times keep stored order
    }
    rows
}

/// The job series' rows, with whether they are in time order (as written; a file edited
/// by hand or a clock stepped back may not be): a step looks only at its own span then.
#[derive(Clone, Copy)]
struct JobRows<'a> {
    rows: &'a [SampleRow],
    in_time_order: bool,
}

impl<'a> JobRows<'a> {
    fn new(rows: &'a [SampleRow]) -> JobRows<'a> {
        let in_time_order = rows.windows(2).all(|w| w[0].t_unix_ms <= w[1].t_unix_ms);
        JobRows {
            rows,
            in_time_order,
        }
    }

    /// The rows that may fall in `start..=end`: exactly those when in time order, else all.
    fn within(self, start: i64, end: i64) -> &'a [SampleRow] {
        if !self.in_time_order {
            return self.rows;
        }
        let from = self.rows.partition_point(|r| r.t_unix_ms < start);
        let to = self.rows.partition_point(|r| r.t_unix_ms <= end);
        &self.rows[from..to.max(from)]
    }
}

/// Schema 2: the sums over every row of series `id` that give its state. The first sums in
/// SQL; the sums of running sums (`t_ms` and `Delta2` columns) in one pass here, which is
/// several times faster than a window in SQLite.
fn sums2(conn: &Connection, path: &Path, version: i64, id: i64) -> Result<Sums2> {
    let e = |e| db_err(path, e);
    let col = |i: usize| VALUE_COLUMNS[i].0;
    let summed: Vec<usize> = schema::main_columns(version)
        .filter(|&i| matches!(schema::ENC[i], Enc::Delta | Enc::Delta2))
        .collect();
    let twice: Vec<usize> = schema::main_columns(version)
        .filter(|&i| schema::ENC[i] == Enc::Delta2)
        .collect();
    let mut s = Sums2 {
        rows: 0,
        t1: 0,
        t2: 0,
        first: [None; NVALUES],
        second: [None; NVALUES],
    };
    let sql = format!(
        "SELECT count(*), SUM(t_ms), {} FROM samples_packed WHERE series = ?1",
        summed
            .iter()
            .map(|i| format!("SUM({})", col(*i)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    conn.query_row(&sql, [id], |r| {
        s.rows = r.get(0)?;
        s.t1 = r.get::<_, Option<i64>>(1)?.unwrap_or(0);
        for (n, i) in summed.iter().enumerate() {
            s.first[*i] = r.get(n + 2)?;
        }
        Ok(())
    })
    .map_err(e)?;
    let sql = format!(
        "SELECT t_ms, {} FROM samples_packed WHERE series = ?1 ORDER BY rowid",
        twice.iter().map(|i| col(*i)).collect::<Vec<_>>().join(", ")
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(e)?;
    let mut q = stmt.query([id]).map_err(e)?;
    let (mut run_t, mut t) = (0i64, 0i64);
    let mut run = [0i64; NVALUES];
    let mut second = [0i64; NVALUES];
    while let Some(r) = q.next().map_err(e)? {
        run_t = run_t.wrapping_add(r.get::<_, i64>(0).map_err(e)?);
        t = t.wrapping_add(run_t);
        for (n, i) in twice.iter().enumerate() {
            if let Some(x) = r.get::<_, Option<i64>>(n + 1).map_err(e)? {
                run[*i] = run[*i].wrapping_add(x);
                second[*i] = second[*i].wrapping_add(run[*i]);
            }
        }
    }
    s.t2 = t;
    for i in twice {
        s.second[i] = Some(second[i]);
    }
    let rare: Vec<usize> = schema::rare_columns(version).collect();
    let sql = format!(
        "SELECT {} FROM samples_rare r JOIN samples_packed p ON p.rowid = r.id
         WHERE p.series = ?1",
        rare.iter()
            .map(|i| format!("SUM(r.{})", col(*i)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    conn.query_row(&sql, [id], |r| {
        for (n, i) in rare.iter().enumerate() {
            s.first[*i] = r.get(n)?;
        }
        Ok(())
    })
    .map_err(e)?;
    Ok(s)
}

/// Schema 2: the latest `samples_rare` row of series `id` before `rowid < before`.
fn last_rare2(
    conn: &Connection,
    path: &Path,
    version: i64,
    id: i64,
    before: i64,
) -> Result<Option<Values>> {
    let rare: Vec<usize> = schema::rare_columns(version).collect();
    let sql = format!(
        "SELECT {} FROM samples_rare r JOIN samples_packed p ON p.rowid = r.id
         WHERE p.series = ?1 AND r.id < ?2 ORDER BY r.id DESC LIMIT 1",
        rare.iter()
            .map(|i| format!("r.{}", VALUE_COLUMNS[*i].0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut last: Values = [None; NVALUES];
    conn.query_row(&sql, [id, before], |r| {
        for (n, i) in rare.iter().enumerate() {
            last[*i] = r.get(n)?;
        }
        Ok(())
    })
    .map(|_| Some(last))
    .or_else(|e| match e {
        rusqlite::Error::QueryReturnedNoRows => Ok(None),
        e => Err(e),
    })
    .map_err(|e| db_err(path, e))
}

/// Schema 2: the state of series `id` after all its rows (the writer's chain).
pub(crate) fn load_state2(conn: &Connection, path: &Path, version: i64, id: i64) -> Result<State2> {
    let s = sums2(conn, path, version, id)?;
    let last = last_rare2(conn, path, version, id, i64::MAX)?;
    Ok(State2::seeded(&s, last.as_ref()))
}

/// Schema 2: one row of [`schema::select_series_sql`]: (stored t_ms, kind, has a
/// `samples_rare` row, values, rowid).
fn row2(r: &rusqlite::Row<'_>, version: i64) -> rusqlite::Result<(i64, i64, bool, Values, i64)> {
    let mut v: Values = [None; NVALUES];
    let order = schema::main_columns(version).chain(schema::rare_columns(version));
    let mut n = 3;
    for i in order {
        v[i] = r.get(n)?;
        n += 1;
    }
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, v, r.get(n)?))
}

/// Schema 2: the first rowid of the last `k` rows of series `id` with `t_ms <= max_t_ms`,
/// and the state before it: the state after every row (one pass of sums), then the rows
/// undone from the end.
fn tail_start2(
    conn: &Connection,
    path: &Path,
    version: i64,
    id: i64,
    max_t_ms: i64,
    k: i64,
) -> Result<Option<(i64, State2)>> {
    let e = |e| db_err(path, e);
    let mut state = load_state2(conn, path, version, id)?;
    let mut start = None;
    {
        let mut stmt = conn
            .prepare_cached(&schema::select_series_sql_desc(version))
            .map_err(e)?;
        let mut q = stmt.query([id]).map_err(e)?;
        let mut found = 0;
        while found < k {
            let Some(r) = q.next().map_err(e)? else {
                break;
            };
            let (t_stored, _, rare, v, rowid) = row2(r, version).map_err(e)?;
            let in_range = state.t_ms() <= max_t_ms;
            state.undo(t_stored, &v, rare);
            if in_range {
                start = Some((rowid, state));
                found += 1;
            }
        }
    }
    let Some((first, mut state)) = start else {
        return Ok(None);
    };
    state.set_readable(last_rare2(conn, path, version, id, first)?.as_ref());
    Ok(Some((first, state)))
}

fn wal_exists(path: &Path) -> bool {
    super::paths::wal(path).exists()
}

fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut s = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/._-~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s.push_str("?immutable=1");
    s
}

pub(crate) fn read_started(conn: &Connection, path: &Path) -> Result<i64> {
    let v: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'started_unix_ms'",
            [],
            |r| r.get(0),
        )
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })
        .map_err(|e| db_err(path, e))?;
    v.and_then(|v| v.parse().ok())
        .ok_or_else(|| sql_err(path, "meta has no valid 'started_unix_ms'"))
}

/// `(series id, step)` in id order.
pub(crate) fn load_steps(conn: &Connection, path: &Path) -> Result<Vec<(i64, StepInfo)>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, step, started_unix_ms, ended_unix_ms, tasks, exit_status FROM steps ORDER BY id",
        )
        .map_err(|e| db_err(path, e))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                StepInfo {
                    step: r.get(1)?,
                    started_unix_ms: r.get(2)?,
                    ended_unix_ms: r.get(3)?,
                    tasks: r.get(4)?,
                    exit_status: r.get(5)?,
                },
            ))
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| db_err(path, e));
    rows
}

#[cfg(test)]
mod tests {
    use super::JobRows;
    use crate::model::{SampleKind, SampleRow, Series};

    fn at(times: &[i64]) -> Vec<SampleRow> {
        let row = |t| SampleRow::empty(t, Series::Job, SampleKind::Periodic);
        times.iter().map(|&t| row(t)).collect()
    }

    fn times(rows: &[SampleRow]) -> Vec<i64> {
        rows.iter().map(|r| r.t_unix_ms).collect()
    }

    #[test]
    fn a_steps_span_takes_the_job_rows_at_both_of_its_ends() {
        let rows = at(&[0, 5, 5, 10, 15]);
        let job = JobRows::new(&rows);
        assert_eq!(times(job.within(5, 10)), [5, 5, 10]);
        assert_eq!(times(job.within(6, 9)), [] as [i64; 0]);
        assert_eq!(times(job.within(11, 4)), [] as [i64; 0]);
        assert_eq!(times(job.within(-3, i64::MAX)), [0, 5, 5, 10, 15]);
        // Out of time order: every row, for the caller to check each.
        let rows = at(&[10, 0, 15]);
        assert_eq!(times(JobRows::new(&rows).within(5, 10)), [10, 0, 15]);
    }
}
