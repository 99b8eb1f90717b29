//! Where the figures come from: the plugin's file, or direct readings of the job's cgroup.
//! Both end as stored-row shaped [`SampleRow`]s, so one builder makes every snapshot.
//! The last resort, `sstat`'s lifetime summary, is kept apart: it has no rows to derive
//! rates from, and its snapshot says so.

use std::cell::{Ref, RefCell};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use slurmwatch_core::analysis::ledger::NodeFigures;
use slurmwatch_core::collect::{JobCollector, CGROUP_ROOT, PROC_ROOT};
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::slurm::sstat;
use slurmwatch_core::snapshot::{
    self, JobFacts, JobState, Reading, Snapshot, SnapshotSource, LEDGER_NEEDS_RECORDING,
};
use slurmwatch_core::store::{Following, JobMeta, Reader};
use slurmwatch_core::sys::now_unix_ms;

use super::throughput::{JobLog, Look};

/// Direct readings kept for peaks and sparklines (a day at 1 s); older ones are dropped.
const DIRECT_ROWS_MAX: usize = 86_400;

/// sstat is asked at most this often, whatever the refresh: every call costs slurmctld and
/// each node of the job a request, and its figures are lifetime totals anyway.
pub const SSTAT_MIN_GAP_SECONDS: u32 = 10;

/// Size and modification time of the file and its WAL: a change means new rows.
type FileSig = [(u64, Option<SystemTime>); 2];

fn file_sig(path: &Path) -> FileSig {
    let one = |p: &Path| std::fs::metadata(p).map_or((0, None), |m| (m.len(), m.modified().ok()));
    [one(path), one(&slurmwatch_core::store::paths::wal(path))]
}

pub enum Feed {
    File {
        reader: Box<Reader>,
        path: PathBuf,
        meta: Box<JobMeta>,
        /// The series shown, decoded as the file grows: a refresh decodes only new rows.
        following: Box<Following>,
        sig: Option<FileSig>,
        cards: RefCell<Option<CardCache>>,
        ledger: RefCell<Option<Box<LedgerCache>>>,
        /// The job's log followed for its throughput (`None`: not asked for, as in CSV).
        log: RefCell<Option<Box<Look>>>,
    },
    Direct {
        collector: Box<JobCollector>,
        rows: Vec<SampleRow>,
        slot_seconds: u32,
    },
    /// One node's snapshot, as its `srun --overlap` hop sent it (taken once).
    Fixed {
        snapshot: Box<Snapshot>,
        shown: bool,
    },
    /// sstat's summary of the running steps, asked again at most every
    /// [`SSTAT_MIN_GAP_SECONDS`].
    Sstat {
        job_id: u32,
        summary: Box<sstat::Summary>,
        t_unix_ms: i64,
        /// When sstat was last asked; `None` until the first summary has been shown.
        asked: Option<Instant>,
    },
}

impl Feed {
    /// Opens a job's file; the error is the store's one clear sentence.
    pub fn open_file(path: &Path, series: Series) -> Result<Feed, String> {
        let reader = Reader::open(path).map_err(|e| e.to_string())?;
        let meta = reader.meta().map_err(|e| e.to_string())?;
        let following = Box::new(reader.following(&series));
        Ok(Feed::File {
            reader: Box::new(reader),
            path: path.to_path_buf(),
            meta: Box::new(meta),
            following,
            sig: None,
            cards: RefCell::new(None),
            ledger: RefCell::new(None),
            log: RefCell::new(None),
        })
    }

    /// Reads the job's own cgroup through `task_pid` (a process of the job on this node).
    pub fn direct(task_pid: u32, job: u32, slot_seconds: u32) -> Feed {
        Feed::Direct {
            collector: Box::new(JobCollector::new(
                Path::new(CGROUP_ROOT),
                Path::new(PROC_ROOT),
                task_pid,
                job,
            )),
            rows: Vec::new(),
            slot_seconds: slot_seconds.max(1),
        }
    }

    /// A first sstat summary, already taken (the caller asked sstat to know it answers).
    pub fn sstat(job_id: u32, summary: sstat::Summary) -> Feed {
        Feed::Sstat {
            job_id,
            summary: Box::new(summary),
            t_unix_ms: now_unix_ms(),
            asked: None,
        }
    }

    pub fn fixed(snapshot: Snapshot) -> Feed {
        Feed::Fixed {
            snapshot: Box::new(snapshot),
            shown: false,
        }
    }

    /// Follows the job's log for its throughput (a file's feed; the others note no sizes).
    pub fn follow_log(&mut self, job_log: &JobLog) {
        if let Feed::File { log, .. } = self {
            *log.get_mut() = Some(Box::new(Look::new(job_log.clone())));
        }
    }

    pub fn meta(&self) -> Option<&JobMeta> {
        match self {
            Feed::File { meta, .. } => Some(meta),
            Feed::Direct { .. } | Feed::Sstat { .. } | Feed::Fixed { .. } => None,
        }
    }

    /// Reads what is new: the file's rows when it changed, or one direct reading.
    /// `Ok(true)` when there is something new to show.
    pub fn refresh(&mut self) -> Result<bool, String> {
        match self {
            Feed::File {
                reader,
                path,
                following,
                sig,
                ..
            } => {
                let now = file_sig(path);
                if sig.as_ref() == Some(&now) {
                    return Ok(false);
                }
                if reader.follow(following).is_err() {
                    // The plugin's close turns its file from WAL into one self-contained file
                    // (`Writer::close`): a connection opened before may fail to read it then
                    // (the end row was lost so), a fresh one reads it.
                    **reader = Reader::open(path).map_err(|e| e.to_string())?;
                    reader.follow(following).map_err(|e| e.to_string())?;
                }
                *sig = Some(now);
                Ok(true)
            }
            Feed::Direct {
                collector, rows, ..
            } => {
                let mut r = SampleRow::empty(now_unix_ms(), Series::Job, SampleKind::Periodic);
                r.usage = collector.read_job();
                r.memory_working_set_max_bytes = r.usage.memory_working_set_bytes;
                rows.push(r);
                if rows.len() > DIRECT_ROWS_MAX {
                    rows.drain(..rows.len() - DIRECT_ROWS_MAX);
                }
                Ok(true)
            }
            Feed::Fixed { shown, .. } => Ok(!std::mem::replace(shown, true)),
            Feed::Sstat {
                job_id,
                summary,
                t_unix_ms,
                asked,
            } => {
                let Some(last) = asked else {
                    // The summary the feed was made with is new to the caller.
                    *asked = Some(Instant::now());
                    return Ok(true);
                };
                if last.elapsed() < Duration::from_secs(SSTAT_MIN_GAP_SECONDS.into()) {
                    return Ok(false);
                }
                *asked = Some(Instant::now());
                // A failed ask keeps the last summary (its time says how old it is).
                let s = sstat::query(*job_id, sstat::TIMEOUT).map_err(|e| e.to_string())?;
                **summary = s;
                *t_unix_ms = now_unix_ms();
                Ok(true)
            }
        }
    }

    /// For `--once` on direct readings: a rate needs two readings, so take a second one
    /// after `gap`. The file needs no wait: its rows already span time.
    pub fn settle(&mut self, gap: Duration) -> Result<(), String> {
        if let Feed::Direct { rows, .. } = self {
            if rows.len() < 2 {
                std::thread::sleep(gap);
                self.refresh()?;
            }
        }
        Ok(())
    }

    /// Has the job's recording ended? (The file's last row is an end row, or the cgroup is
    /// gone.) Slurm's answer is authoritative; this catches the end between queue polls.
    pub fn looks_ended(&self) -> bool {
        match self {
            Feed::File { following, .. } => following
                .rows()
                .last()
                .is_some_and(|r| r.kind == SampleKind::End),
            Feed::Direct { rows, .. } => rows
                .last()
                .is_some_and(|r| r.usage.cpu_usage_usec.is_none() && rows.len() > 1),
            Feed::Sstat { .. } => false,
            Feed::Fixed { snapshot, .. } => snapshot.state == JobState::Ended,
        }
    }

    /// A file whose last row is not its end row: more rows may come, the end row last.
    pub fn awaits_end_row(&self) -> bool {
        matches!(self, Feed::File { .. }) && !self.looks_ended()
    }

    pub fn interval_seconds(&self) -> Option<u32> {
        match self {
            Feed::File { meta, .. } => Some(meta.interval_seconds),
            Feed::Direct { slot_seconds, .. } => Some(*slot_seconds),
            Feed::Sstat { .. } => Some(SSTAT_MIN_GAP_SECONDS),
            Feed::Fixed { snapshot, .. } => snapshot.interval_seconds,
        }
    }

    /// The times of the stored rows newer than `after_ms`, oldest first; `None` for a feed
    /// with one reading per look by nature (direct readings, sstat, a hop's snapshot).
    pub fn row_times_after(&self, after_ms: Option<i64>) -> Option<Vec<i64>> {
        let Feed::File { following, .. } = self else {
            return None;
        };
        let rows = following.rows();
        Some(
            rows[first_after(rows, after_ms)..]
                .iter()
                .map(|r| r.t_unix_ms)
                .collect(),
        )
    }

    /// The snapshot as of each of `times` (ascending): the file's as of its last row at or
    /// before each time, built by the one row builder (`snapshot::from_each_row`), its cards
    /// as of that row; a feed without rows gives its one current snapshot for each.
    pub fn snapshots_at(&self, facts: &JobFacts, times: &[i64]) -> Vec<Snapshot> {
        let Feed::File {
            reader,
            following,
            cards,
            ..
        } = self
        else {
            return times.iter().map(|_| self.snapshot(facts)).collect();
        };
        let rows = following.rows();
        // The row each time shows (`None`: before the first row); rows are in time order.
        let at: Vec<Option<usize>> = times
            .iter()
            .map(|t| rows.partition_point(|r| r.t_unix_ms <= *t).checked_sub(1))
            .collect();
        let (Some(first), Some(last)) = (at.iter().flatten().min(), at.iter().flatten().max())
        else {
            return times
                .iter()
                .map(|_| self.empty_file_snapshot(facts))
                .collect();
        };
        let (src, meta) = (SnapshotSource::PluginFile, self.meta());
        let built = snapshot::from_each_row(src, meta, facts, rows, *first..*last + 1, true);
        let slot = self.interval_seconds().unwrap_or(1).max(1);
        let cards = CardCache::for_rows(cards, reader, rows.len(), *first..*last + 1);
        at.iter()
            .map(|i| match i {
                None => self.empty_file_snapshot(facts),
                Some(i) => {
                    let mut s = built[i - first].clone();
                    // The ledger so far is the newest row's (one per look, not one per row).
                    match i + 1 == rows.len() {
                        true => {
                            snapshot::set_ledger(&mut s, self.ledger_figures());
                            s.phases = self.phases_so_far();
                        }
                        false => s.ledger = Reading::missing(LOG_NO_LEDGER),
                    }
                    // The newest row shows every card's newest reading, as the live view does.
                    let until = (i + 1 < rows.len()).then_some(rows[*i].t_unix_ms);
                    s.gpus = cards.as_of(until, slot);
                    running_unless_told(s, facts)
                }
            })
            .collect()
    }

    /// The file's node's figures for the ledger, as of its rows now: kept from the last
    /// time while computing them again (every card reading is read) would take more than
    /// 1/[`LEDGER_COST_RATIO`] of the time since, unless the recording has ended.
    fn ledger_figures(&self) -> Result<NodeFigures, String> {
        let Feed::File {
            reader,
            meta,
            following,
            ledger,
            ..
        } = self
        else {
            return Err(LEDGER_NEEDS_RECORDING.to_string());
        };
        if following.series() != &Series::Job {
            return Err(STEP_NO_LEDGER.to_string());
        }
        let rows = following.rows();
        let key = (rows.len(), rows.last().map(|r| r.t_unix_ms));
        let mut kept = ledger.borrow_mut();
        let due = kept.as_ref().is_none_or(|c| {
            c.key != key && (c.at.elapsed() >= c.took * LEDGER_COST_RATIO || self.looks_ended())
        });
        if due {
            let at = Instant::now();
            let figures = NodeFigures::read(reader, meta, rows).map_err(|e| e.to_string());
            *kept = Some(Box::new(LedgerCache {
                key,
                at,
                took: at.elapsed(),
                figures,
            }));
        }
        kept.as_ref().expect("just filled").figures.clone()
    }

    /// The phases the job marked so far, from the file's mark events and the job's rows
    /// (CPU, time, peak memory; the cards' energy is the report's). Empty for a step's view.
    fn phases_so_far(&self) -> Vec<slurmwatch_core::analysis::phases::Phase> {
        use slurmwatch_core::analysis::phases;
        let Feed::File {
            reader, following, ..
        } = self
        else {
            return Vec::new();
        };
        if following.series() != &Series::Job {
            return Vec::new();
        }
        let marks = reader
            .events()
            .map(|e| phases::marks(&e))
            .unwrap_or_default();
        phases::phases(&marks, following.rows(), &[])
    }

    /// The job's throughput so far, from its log when followed (the whole job's view only:
    /// the sizes are the batch script's output's); the log is read again only when due.
    fn throughput_so_far(&self) -> Option<slurmwatch_core::analysis::throughput::Throughput> {
        let Feed::File {
            reader,
            following,
            log,
            ..
        } = self
        else {
            return None;
        };
        if following.series() != &Series::Job {
            return None;
        }
        let newest_row = following.rows().last().map(|r| r.t_unix_ms);
        log.borrow_mut()
            .as_mut()?
            .get(reader, newest_row, Instant::now())
    }

    /// The file's snapshot before its first row.
    fn empty_file_snapshot(&self, facts: &JobFacts) -> Snapshot {
        let s = snapshot::from_rows(SnapshotSource::PluginFile, self.meta(), facts, &[], true);
        running_unless_told(s, facts)
    }

    pub fn snapshot(&self, facts: &JobFacts) -> Snapshot {
        match self {
            Feed::File {
                reader,
                meta,
                following,
                ..
            } => {
                let rows = following.rows();
                let mut s =
                    snapshot::from_rows(SnapshotSource::PluginFile, Some(meta), facts, rows, true);
                s.gpus = snapshot::gpus_from_reader(reader, meta.interval_seconds.max(1));
                snapshot::set_ledger(&mut s, self.ledger_figures());
                s.phases = self.phases_so_far();
                s.throughput = self.throughput_so_far();
                running_unless_told(s, facts)
            }
            Feed::Direct {
                collector,
                rows,
                slot_seconds,
            } => {
                // Skip the trailing unreadable row of a vanished cgroup: show the last real one.
                let shown = match rows.iter().rposition(|r| r.usage.cpu_usage_usec.is_some()) {
                    Some(i) => &rows[..=i],
                    None => &rows[..],
                };
                let mut s = snapshot::from_rows(SnapshotSource::Direct, None, facts, shown, false);
                s.ledger = Reading::missing(DIRECT_NO_LEDGER);
                s.measured_by = Some(collector.source());
                s.interval_seconds = Some(*slot_seconds);
                s.history = snapshot::history(shown, *slot_seconds, snapshot::HISTORY_SLOTS);
                s
            }
            Feed::Sstat {
                summary, t_unix_ms, ..
            } => snapshot::from_sstat(facts, summary, *t_unix_ms),
            Feed::Fixed { snapshot, .. } => (**snapshot).clone(),
        }
    }
}

/// The ledger's figures are computed again at most once per this many times their cost
/// (a few ms for a day's job; a week of 5-s rows with four cards reads every card reading).
const LEDGER_COST_RATIO: u32 = 20;

const STEP_NO_LEDGER: &str =
    "the ledger is the whole job's: shown without a step (and by `slurmwatch report`)";
const DIRECT_NO_LEDGER: &str = "direct readings began when this view started: the ledger needs the plugin's recording from the job's first row";
const LOG_NO_LEDGER: &str = "computed for the newest stored row at each look only, not for the rows stored between: `--once --json` and `slurmwatch report` give it";

/// A node's ledger figures as of the followed rows `key` (their count and newest time).
pub struct LedgerCache {
    key: (usize, Option<i64>),
    at: Instant,
    took: Duration,
    figures: Result<NodeFigures, String>,
}

/// A file being read without Slurm's word is taken as running until its end row.
fn running_unless_told(mut s: Snapshot, facts: &JobFacts) -> Snapshot {
    if facts.state.is_none() && s.state == JobState::Unknown {
        s.state = JobState::Running;
    }
    s
}

/// The index of the first row newer than `after_ms` (all rows when `None`). Rows are in
/// time order; a row at or before the last one written is never written again.
fn first_after(rows: &[SampleRow], after_ms: Option<i64>) -> usize {
    match after_ms {
        None => 0,
        Some(a) => rows
            .iter()
            .rposition(|r| r.t_unix_ms <= a)
            .map_or(0, |i| i + 1),
    }
}

/// The cards as read for a batch of `--log`'s rows, kept for the next batches of the same
/// catch-up: each read takes every card reading from the batch's first row to the file's
/// end, so reading them again per batch was quadratic (a day of 1-s rows with four cards:
/// 65 s).
pub struct CardCache {
    /// The followed rows when the cards were read, and the first row they serve.
    rows_then: usize,
    from_row: usize,
    cards: snapshot::StoredCards,
}

impl CardCache {
    /// The cards for the rows `each` of `rows_now`: the kept ones while they were read with
    /// these rows already stored and the batch ends before the newest row (which shows every
    /// card's newest reading), else read afresh.
    fn for_rows<'c>(
        cache: &'c RefCell<Option<CardCache>>,
        reader: &Reader,
        rows_now: usize,
        each: std::ops::Range<usize>,
    ) -> Ref<'c, snapshot::StoredCards> {
        let kept = cache.borrow().as_ref().is_some_and(|c| {
            each.start >= c.from_row && each.end <= c.rows_then && each.end < rows_now
        });
        if !kept {
            let extra = u32::try_from(rows_now - each.start).unwrap_or(u32::MAX);
            *cache.borrow_mut() = Some(CardCache {
                rows_then: rows_now,
                from_row: each.start,
                cards: snapshot::StoredCards::load(reader, extra),
            });
        }
        Ref::map(cache.borrow(), |c| &c.as_ref().expect("just filled").cards)
    }
}
