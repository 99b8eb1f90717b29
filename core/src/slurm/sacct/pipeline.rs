//! A window's answers parsed on two threads of their own while the caller works on the jobs:
//! the *feeder* cuts sacct's bytes into the header and whole records (see
//! [`records`](super::records): text work only), the *grouper* types each record and groups
//! them into jobs, and the caller's thread hands each job on. On two cores the typing alone
//! was as much work as the caller's and the rest of the parse together; split so, no one
//! thread's share sets the wall time.
//!
//! A caller with costly work per job that needs nothing of the others (`history` decoding
//! each job's summary from its AdminComment, ~10 µs a job) hands it to a fourth stage, the
//! *preparer*, between the grouper and itself: done on the caller's thread, it alone set the
//! wall time while the other core waited.
//!
//! Order needs no sequence numbers: each stage is one thread reading one FIFO channel. Memory
//! is bounded by the channels' bounds, never by the answer: at most [`BLOCKS_IN_FLIGHT`]
//! blocks of text and [`BATCHES_IN_FLIGHT`] batches of jobs wait. What a stage has handed on
//! goes back to it to be reused or dropped: freeing another thread's allocations contends for
//! its malloc arena (it doubled the CPU time).

use std::sync::mpsc::{self, Receiver, Sender, SyncSender};

use super::columns::Kept;
use super::group::{Jobs, Tally};
use super::records::{Cut, Records};
use super::{JobAccounting, SacctError};

/// Text per block handed from the feeder to the grouper (a few hundred records)…
const BLOCK_BYTES: usize = 64 << 10;
/// …and blocks that may wait for it.
const BLOCKS_IN_FLIGHT: usize = 8;
/// Jobs handed from the grouper to the caller at a time…
const JOBS_PER_BATCH: usize = 256;
/// …and batches that may wait for it.
const BATCHES_IN_FLIGHT: usize = 8;

/// Whole records, end to end in one buffer (a record may hold a `\n` inside a field), each
/// with its values' spans: the feeder has the time to find them, the grouper not.
#[derive(Default)]
struct Block {
    text: String,
    /// Where each record's text ends, and its spans.
    ends: Vec<(usize, usize)>,
    spans: Vec<(usize, usize)>,
}

impl Block {
    fn push(&mut self, record: &str, spans: &[(usize, usize)]) {
        self.text.push_str(record);
        self.spans.extend_from_slice(spans);
        self.ends.push((self.text.len(), self.spans.len()));
    }

    fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
        self.spans.clear();
    }

    /// Each record, and its values' spans in it.
    fn records(&self) -> impl Iterator<Item = (&str, &[(usize, usize)])> {
        let (mut start, mut first) = (0, 0);
        self.ends.iter().map(move |&(end, last)| {
            let r = (&self.text[start..end], &self.spans[first..last]);
            (start, first) = (end, last);
            r
        })
    }
}

/// What the feeder hands the grouper, in an answer's order.
enum Piece {
    /// An answer's column names.
    Header(Vec<String>),
    Block(Block),
    /// The answer ended whole, with this many records that could not be cut.
    End {
        skipped: usize,
    },
}

/// The feeder's end: where a window's answers are written, as sacct prints them.
pub(super) struct Feed {
    records: Option<Records>,
    block: Block,
    to_grouper: SyncSender<Piece>,
    spare: Receiver<Block>,
}

impl Feed {
    /// A new answer, split by `delimiter`; one begun and not ended is dropped (a call that
    /// failed before printing anything, retried).
    pub fn begin(&mut self, delimiter: &str) {
        self.records = Some(Records::new(delimiter));
    }

    /// The current answer's next bytes.
    pub fn bytes(&mut self, chunk: &[u8]) {
        let Some(mut records) = self.records.take() else {
            return;
        };
        records.push(chunk, &mut |cut| self.cut(cut));
        self.records = Some(records);
    }

    /// Whether the current answer has handed anything on (a header or a record).
    pub fn handed_on(&self) -> bool {
        self.records.as_ref().is_some_and(|r| r.cuts > 0)
    }

    /// The current answer ended whole (sacct exited well): its last job is complete.
    pub fn end_answer(&mut self) {
        if let Some(mut records) = self.records.take() {
            records.finish(&mut |cut| self.cut(cut));
            self.flush();
            self.send(Piece::End {
                skipped: records.skipped,
            });
        }
    }

    fn cut(&mut self, cut: Cut<'_>) {
        match cut {
            Cut::Header(names) => {
                self.flush();
                self.send(Piece::Header(names));
            }
            Cut::Record(text, spans) => {
                self.block.push(text, spans);
                if self.block.text.len() >= BLOCK_BYTES {
                    self.flush();
                }
            }
        }
    }

    fn flush(&mut self) {
        if self.block.ends.is_empty() {
            return;
        }
        let mut fresh = self.spare.try_recv().unwrap_or_default();
        fresh.clear();
        let full = std::mem::replace(&mut self.block, fresh);
        self.send(Piece::Block(full));
    }

    /// A closed channel: the grouper is unwinding; the rest is dropped.
    fn send(&self, p: Piece) {
        let _ = self.to_grouper.send(p);
    }
}

/// Runs `source` (which writes each answer of a window to the [`Feed`]) on the feeder thread,
/// hands each job to `on_job` on this thread as soon as its last line is typed, with what
/// `prepare` (when given) made of it on a thread of its own, and returns what the answers held
/// besides their jobs. `source`'s error is the result; the jobs completed before it have been
/// handed on (an answer cut short loses its last job). `T` is plain data (`Copy`): what is
/// made on one thread and dropped on another would contend for malloc's arenas.
pub(super) fn window_jobs<T: Copy + Send>(
    kept: Kept,
    source: impl FnOnce(&mut Feed) -> Result<(), SacctError> + Send,
    prepare: Option<&(dyn Fn(&JobAccounting) -> T + Sync)>,
    on_job: &mut dyn FnMut(&JobAccounting, Option<T>),
) -> Result<Tally, SacctError> {
    let (to_grouper, pieces) = mpsc::sync_channel::<Piece>(BLOCKS_IN_FLIGHT);
    let (spare_tx, spare) = mpsc::channel::<Block>();
    let (to_caller, batches) = mpsc::sync_channel::<Vec<JobAccounting>>(BATCHES_IN_FLIGHT);
    let (done_tx, done) = mpsc::channel::<Vec<JobAccounting>>();
    std::thread::scope(|s| {
        let feeder = s.spawn(move || {
            let mut feed = Feed {
                records: None,
                block: Block::default(),
                to_grouper,
                spare,
            };
            let r = source(&mut feed);
            // What an answer cut short completed is handed on, as a one-thread parse would.
            feed.flush();
            r
        });
        let grouper = s.spawn(move || group(kept, pieces, spare_tx, to_caller, done));
        match prepare {
            None => {
                for batch in batches {
                    batch.iter().for_each(|r| on_job(r, None));
                    let _ = done_tx.send(batch);
                }
            }
            Some(prepare) => {
                let (to_caller, prepared) =
                    mpsc::sync_channel::<(Vec<JobAccounting>, Vec<T>)>(BATCHES_IN_FLIGHT);
                let (spent_tx, spent) = mpsc::channel::<Vec<T>>();
                let preparer = s.spawn(move || {
                    for batch in batches {
                        let mut made = spent.try_recv().unwrap_or_default();
                        made.clear();
                        made.extend(batch.iter().map(prepare));
                        // A closed channel: the caller is unwinding; the rest is dropped.
                        if to_caller.send((batch, made)).is_err() {
                            break;
                        }
                    }
                });
                for (batch, made) in prepared {
                    for (r, t) in batch.iter().zip(&made) {
                        on_job(r, Some(*t));
                    }
                    let _ = done_tx.send(batch);
                    let _ = spent_tx.send(made);
                }
                preparer
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
            }
        }
        let tally = grouper
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        feeder
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        Ok(tally)
    })
}

/// The grouper: each answer's records typed and grouped into jobs, handed on in batches.
fn group(
    kept: Kept,
    pieces: Receiver<Piece>,
    spare: Sender<Block>,
    to_caller: SyncSender<Vec<JobAccounting>>,
    done: Receiver<Vec<JobAccounting>>,
) -> Tally {
    let mut out = Batches {
        batch: Vec::with_capacity(JOBS_PER_BATCH),
        to_caller,
        done,
    };
    let mut jobs: Option<Jobs> = None;
    let mut tally = Tally::default();
    for piece in pieces {
        match piece {
            Piece::Header(names) => jobs = Some(Jobs::new(names, kept)),
            Piece::Block(b) => {
                if let Some(j) = &mut jobs {
                    b.records()
                        .filter_map(|(r, spans)| j.push(r, spans))
                        .for_each(|r| out.push(r));
                }
                let _ = spare.send(b);
            }
            Piece::End { skipped } => {
                if let Some(mut j) = jobs.take() {
                    if let Some(r) = j.finish() {
                        out.push(r);
                    }
                    tally += j.tally;
                }
                tally.skipped_lines += skipped;
            }
        }
    }
    out.flush();
    tally
}

/// Jobs on their way to the caller, and the batches it has read coming back to be dropped.
struct Batches {
    batch: Vec<JobAccounting>,
    to_caller: SyncSender<Vec<JobAccounting>>,
    done: Receiver<Vec<JobAccounting>>,
}

impl Batches {
    fn push(&mut self, r: JobAccounting) {
        self.batch.push(r);
        if self.batch.len() == JOBS_PER_BATCH {
            self.flush();
        }
    }

    /// The batch to the caller; the next one is a read batch emptied here, where its jobs
    /// were allocated (a fresh one only while none has come back).
    fn flush(&mut self) {
        let mut next = None;
        while let Ok(mut old) = self.done.try_recv() {
            old.clear();
            next = Some(old);
        }
        let next = next.unwrap_or_else(|| Vec::with_capacity(JOBS_PER_BATCH));
        let full = std::mem::replace(&mut self.batch, next);
        // A closed channel: the caller is unwinding; the rest is dropped.
        let _ = self.to_caller.send(full);
    }
}
