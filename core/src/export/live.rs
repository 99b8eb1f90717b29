//! The latest readings of the jobs running on this node, from its spool: what an exporter
//! publishes at each scrape.
//!
//! Why a gatherer of its own rather than the live view's code: an exporter runs as root
//! against every file in the spool, every few seconds, unattended. So it
//! - opens each file with the hardened [`Reader`] (size cap, schema check, deadline): a file
//!   it cannot read is reported as such ([`FileState::Error`]) and the scrape goes on;
//! - bounds the whole scrape ([`GatherOptions::deadline`]) and each file
//!   ([`GatherOptions::per_file`]); files left when time runs out are reported unchecked;
//! - never writes (the reader is `SQLITE_OPEN_READ_ONLY`);
//! - publishes nothing for a job that has ended, so no stale series outlives it: the
//!   epilog's summary is in the file, or no step but the extern one is still running, or
//!   the job's last row is its end row, or its latest reading is older than
//!   [`stale_after_ms`] (a node that lost its slurmstepd never marks the step ended);
//! - skips without opening files not written for [`GatherOptions::max_age`] (the spool
//!   keeps ended jobs' files for `retain_days`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::model::{SampleKind, SampleRow, Series};
use crate::recording::rows::STEP_ROW_EVERY;
use crate::sample::GpuCard;
use crate::store::{step_row_is_redundant, summary, Deadline, GpuRow, JobMeta, Reader};

/// The most directory entries one scrape looks at (the spool of a busy node holds a few
/// thousand files over `retain_days`).
pub const MAX_SPOOL_ENTRIES: usize = 20_000;

/// A reading older than this many intervals (and at least [`STALE_MIN_MS`]) is not current.
pub const STALE_INTERVALS: i64 = 3;
pub const STALE_MIN_MS: i64 = 30_000;

/// When a series' latest reading stops being current, for a recording every
/// `interval_seconds`: the plugin stores a row every interval (and flushes every few), so
/// three intervals without one means nothing is recording it.
pub fn stale_after_ms(interval_seconds: u32) -> i64 {
    (i64::from(interval_seconds) * 1000 * STALE_INTERVALS).max(STALE_MIN_MS)
}

/// Bounds of one scrape.
#[derive(Debug, Clone, Copy)]
pub struct GatherOptions {
    /// "Now" for the staleness rule, ms since the epoch.
    pub now_unix_ms: i64,
    /// The whole scrape.
    pub deadline: Duration,
    /// Each file (never more than what is left of `deadline`).
    pub per_file: Duration,
    /// Files (and their `-wal`) last modified longer ago than this are not opened.
    pub max_age: Duration,
}

impl GatherOptions {
    /// 5 s per scrape, 2 s per file (a running 7-day job at 5 s takes ~0.4 s on a loaded
    /// 2-core machine: examples/scrape_cost.rs); files idle for more than 3 × the site's longest
    /// interval (plus a minute) are not opened.
    pub fn standard(max_interval_seconds: u32) -> GatherOptions {
        GatherOptions {
            now_unix_ms: crate::sys::now_unix_ms(),
            deadline: Duration::from_secs(5),
            per_file: Duration::from_secs(2),
            max_age: Duration::from_secs(u64::from(max_interval_seconds) * 3 + 60),
        }
    }
}

/// One series' latest reading: the whole job on this node (`step: None`) or one step.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSeries {
    pub step: Option<String>,
    pub row: SampleRow,
}

/// One of the job's cards and its latest reading.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveGpu {
    pub card: GpuCard,
    /// The step that records the card.
    pub step: String,
    pub row: GpuRow,
}

/// A running job's latest readings on this node.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveJob {
    pub meta: JobMeta,
    /// The job's series first (when current), then each running step's.
    pub series: Vec<LiveSeries>,
    pub gpus: Vec<LiveGpu>,
}

/// What the scrape made of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    /// A running job's file (its readings are in [`Scrape::jobs`]).
    Live,
    /// The job has ended (or nothing records it any more): no series.
    Ended,
    /// Running by the file, but no current reading (none yet, or the latest is older than
    /// [`stale_after_ms`]): no series.
    Stale,
    /// Could not be opened or read: the reason, one sentence.
    Error(String),
    /// The scrape's deadline passed before this file was read.
    Unchecked,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStatus {
    /// From the file name (`<job>.sqlite`, `store::paths::job_of_live_name`).
    pub job_id: u32,
    pub path: PathBuf,
    pub state: FileState,
}

/// One scrape of a spool.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    pub jobs: Vec<LiveJob>,
    /// Every file that was recent enough to look at, in job id order.
    pub files: Vec<FileStatus>,
    /// Recent files the deadline left unread.
    pub deadline_exceeded: bool,
    /// The spool could not be listed: why.
    pub spool_error: Option<String>,
    pub duration: Duration,
}

/// What identifies one state of a file on disk: device, inode, length and modification
/// time of the file and of its `-wal`. Any write changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileKey([i64; 7]);

/// The file's key and its last write (the file's or its `-wal`'s: SQLite appends to the
/// `-wal` between checkpoints, so the main file's time alone lags). `None`: not a regular
/// file.
fn stat(path: &Path) -> Option<(FileKey, SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let main = std::fs::symlink_metadata(path).ok()?;
    if !main.file_type().is_file() {
        return None;
    }
    let wal = std::fs::symlink_metadata(crate::store::paths::wal(path)).ok();
    let t = main.modified().ok()?;
    let last = wal
        .as_ref()
        .and_then(|w| w.modified().ok())
        .map_or(t, |w| w.max(t));
    let (wal_len, wal_ns) = wal.map_or((-1, -1), |w| {
        (w.len() as i64, w.mtime() * 1_000_000_000 + w.mtime_nsec())
    });
    let key = FileKey([
        main.dev() as i64,
        main.ino() as i64,
        main.len() as i64,
        main.mtime(),
        main.mtime_nsec(),
        wal_len,
        wal_ns,
    ]);
    Some((key, last))
}

/// Verdicts that hold until the file changes, kept between the scrapes of one exporter
/// process: a file whose job has ended, or that could not be read, is not opened again while
/// its [`FileKey`] stays the same (a busy node's spool holds hundreds of recently ended jobs).
#[derive(Debug, Default)]
pub struct Verdicts(std::collections::HashMap<PathBuf, (FileKey, FileState)>);

/// Gathers the running jobs' latest readings from `spool`.
pub fn gather(spool: &Path, opts: &GatherOptions) -> Scrape {
    gather_with(spool, opts, &mut Verdicts::default())
}

/// As [`gather`], reusing (and updating) the verdicts of earlier scrapes.
pub fn gather_with(spool: &Path, opts: &GatherOptions, verdicts: &mut Verdicts) -> Scrape {
    let started = Instant::now();
    let mut out = Scrape::default();
    let entries = match std::fs::read_dir(spool) {
        Ok(e) => e,
        Err(e) => {
            out.spool_error = Some(format!("cannot list {}: {e}", spool.display()));
            out.duration = started.elapsed();
            return out;
        }
    };
    let now = UNIX_EPOCH + Duration::from_millis(opts.now_unix_ms.max(0) as u64);
    let mut files: Vec<(u32, PathBuf, FileKey)> = Vec::new();
    for entry in entries.take(MAX_SPOOL_ENTRIES).flatten() {
        let name = entry.file_name();
        let Some(job) = name
            .to_str()
            .and_then(crate::store::paths::job_of_live_name)
        else {
            continue;
        };
        let path = entry.path();
        let Some((key, last)) = stat(&path) else {
            continue;
        };
        let recent = now
            .duration_since(last)
            .map_or(true, |age| age <= opts.max_age);
        if recent {
            files.push((job, path, key));
        }
    }
    files.sort_by_key(|(job, _, _)| *job);
    let mut kept = Verdicts::default();
    for (job_id, path, key) in files {
        let left = opts.deadline.saturating_sub(started.elapsed());
        let state = match verdicts.0.remove(&path) {
            Some((k, state)) if k == key => state,
            _ if left.is_zero() => {
                out.deadline_exceeded = true;
                FileState::Unchecked
            }
            _ => {
                let deadline = Deadline::after(left.min(opts.per_file));
                match read_file(&path, job_id, deadline, opts.now_unix_ms) {
                    Ok(Outcome::Live(job)) => {
                        out.jobs.push(*job);
                        FileState::Live
                    }
                    Ok(Outcome::Ended) => FileState::Ended,
                    Ok(Outcome::Stale) => FileState::Stale,
                    Err(e) => FileState::Error(e.to_string()),
                }
            }
        };
        // A deadline that fired says nothing lasting about the file: read it again next time.
        let lasting = match &state {
            FileState::Ended => true,
            FileState::Error(e) => !e.contains("took longer than"),
            _ => false,
        };
        if lasting {
            kept.0.insert(path.clone(), (key, state.clone()));
        }
        out.files.push(FileStatus {
            job_id,
            path,
            state,
        });
    }
    *verdicts = kept;
    out.duration = started.elapsed();
    out
}

enum Outcome {
    Live(Box<LiveJob>),
    Ended,
    Stale,
}

fn read_file(
    path: &Path,
    job_id: u32,
    deadline: Deadline,
    now: i64,
) -> crate::error::Result<Outcome> {
    let reader = Reader::open_until(path, deadline)?;
    let meta = reader.meta()?;
    if meta.job_id != u64::from(job_id) {
        return Err(crate::error::Error::Store(format!(
            "{}: holds job {}, not the job its name says",
            path.display(),
            meta.job_id
        )));
    }
    if summary::read(&reader)?.is_some() {
        return Ok(Outcome::Ended);
    }
    let steps = reader.steps()?;
    let running: Vec<&str> = steps
        .iter()
        .filter(|s| s.ended_unix_ms.is_none())
        .map(|s| s.step.as_str())
        .collect();
    if !running.iter().any(|s| *s != crate::store::EXTERN_STEP) {
        return Ok(Outcome::Ended);
    }
    let stale_ms = stale_after_ms(meta.interval_seconds);
    // While several steps run, the plugin stores a step's periodic rows only every
    // STEP_ROW_EVERY intervals (`recording::rows`, the one constant): a step's reading is
    // current for that longer period.
    let step_stale_ms = stale_after_ms(meta.interval_seconds.saturating_mul(STEP_ROW_EVERY));
    let job_row = reader.last_stored(&Series::Job)?;
    if job_row.as_ref().is_some_and(|r| r.kind == SampleKind::End) {
        return Ok(Outcome::Ended);
    }
    let job_row = job_row.filter(|r| now - r.t_unix_ms <= stale_ms);
    let mut series = Vec::new();
    for step in &running {
        // While a step is the only one running, its reading is the job's (the writer stores
        // no row of its own then: `step_row_is_redundant`); else its own latest row.
        let row = match &job_row {
            Some(j) if step_row_is_redundant(step, j.t_unix_ms, &steps) => Some(j.clone()),
            _ => reader
                .last_stored(&Series::step(*step))?
                .filter(|r| now - r.t_unix_ms <= step_stale_ms),
        };
        if let Some(mut row) = row {
            row.series = Series::step(*step);
            series.push(LiveSeries {
                step: Some(step.to_string()),
                row,
            });
        }
    }
    if let Some(row) = job_row {
        series.insert(0, LiveSeries { step: None, row });
    }
    let mut gpus = Vec::new();
    for g in reader.gpus()? {
        if !running.contains(&g.step.as_str()) {
            continue;
        }
        if let Some(row) = reader.gpu_last(g.id, 1)?.pop() {
            if now - row.t_unix_ms <= stale_ms {
                gpus.push(LiveGpu {
                    card: g.card,
                    step: g.step,
                    row,
                });
            }
        }
    }
    if series.is_empty() && gpus.is_empty() {
        return Ok(Outcome::Stale);
    }
    Ok(Outcome::Live(Box::new(LiveJob { meta, series, gpus })))
}
