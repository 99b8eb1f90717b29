//! The collector on its own thread. `nvmlInit` can take seconds (driver load, persistence
//! mode off) and a call on a card that fell off the bus can hang; the sampler must do
//! neither. It starts the worker (no wait), polls for the opened cards, and gives each
//! reading a bounded wait: a reading that does not come back in time is recorded as
//! `TIMEOUT` for every figure of every card, and no new request is queued behind it.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::Duration;

use super::{pids, GpuCollector, NoGpus, Wanted};
use crate::sample::{GpuCard, GpuError, GpuLink, GpuSample, IdleTime};

/// What the worker needs: the site's library path, the job's cards, and how to tell the
/// job's processes (its id and the roots of its process trees, for the /proc fallback).
#[derive(Debug, Clone)]
pub struct GpuWorkerConfig {
    pub lib_path: PathBuf,
    pub wanted: Vec<Wanted>,
    /// Slurm's allocation on this node (`GpuCollector::open_allocated`); `None`: unchecked.
    pub allocated: Option<Vec<u32>>,
    pub proc_root: PathBuf,
    pub job_id: u32,
    /// The step's start: the cards' time with no work counts from it (`None`: from when
    /// NVML opened; see `GpuCollector::count_ledger_from`).
    pub ledger_since_unix_ms: Option<u64>,
}

/// The worker's answer to opening NVML.
#[derive(Debug, Clone)]
pub enum Opened {
    /// Still initialising: ask again later.
    Pending,
    Ready {
        cards: Vec<GpuCard>,
        topology: Vec<GpuLink>,
    },
    /// No GPU section for this step, and why (not an error).
    None(String),
}

enum Req {
    Read { seq: u64, roots: Vec<u32> },
}

enum Reply {
    Opened(Result<(Vec<GpuCard>, Vec<GpuLink>), NoGpus>),
    /// The reading taken as soon as NVML opened, and its time (Unix ms).
    Base(i64, Vec<GpuSample>),
    Read(u64, Vec<GpuSample>),
}

pub struct GpuWorker {
    tx: Sender<Req>,
    rx: Receiver<Reply>,
    state: State,
    seq: u64,
    /// A request whose reply has not come back yet.
    outstanding: Option<u64>,
    /// Xid events of replies that came too late to be stored: NVML delivers each event
    /// once, so they go with the next reading that is stored.
    late_xids: Vec<Vec<u64>>,
    /// Idle time of those replies, per card: the cursor moved past it, so it too goes with
    /// the next stored reading (else the cumulative no-work time would lose it).
    late_idle: Vec<IdleTime>,
    /// The cards' first reading, taken by the worker the moment NVML opened (the base of
    /// their cumulative counters), until the sampler stores it; `base_taken` once it has.
    base: Option<(i64, Vec<GpuSample>)>,
    base_taken: bool,
}

enum State {
    Opening,
    Ready(usize),
    Closed,
}

impl GpuWorker {
    /// Starts the worker thread, which opens NVML. Never blocks.
    pub fn start(cfg: GpuWorkerConfig) -> GpuWorker {
        let (tx, req_rx) = mpsc::channel::<Req>();
        let (reply_tx, rx) = mpsc::channel::<Reply>();
        let spawned = std::thread::Builder::new()
            .name("slurmwatch-gpu".into())
            .stack_size(512 * 1024)
            .spawn(move || {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    serve(cfg, req_rx, reply_tx)
                }));
            });
        let state = if spawned.is_ok() {
            State::Opening
        } else {
            State::Closed
        };
        GpuWorker {
            tx,
            rx,
            state,
            seq: 0,
            outstanding: None,
            late_xids: Vec::new(),
            late_idle: Vec::new(),
            base: None,
            base_taken: false,
        }
    }

    /// Waits up to `wait` for NVML to open. Returns `Ready` once (later calls: `None`).
    pub fn poll_open(&mut self, wait: Duration) -> Opened {
        match self.state {
            State::Opening => {}
            State::Ready(_) => return Opened::None("already open".into()),
            State::Closed => return Opened::None("the GPU reader is not running".into()),
        }
        match self.rx.recv_timeout(wait) {
            Ok(Reply::Opened(Ok((cards, topology)))) => {
                self.state = State::Ready(cards.len());
                Opened::Ready { cards, topology }
            }
            Ok(Reply::Opened(Err(why))) => {
                self.state = State::Closed;
                Opened::None(why.to_string())
            }
            Ok(Reply::Read(..) | Reply::Base(..)) | Err(RecvTimeoutError::Timeout) => {
                Opened::Pending
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.state = State::Closed;
                Opened::None("the GPU reader stopped".into())
            }
        }
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready(_))
    }

    /// One reading of every card, waiting at most `wait`. `None` before the cards are open.
    /// A late or lost reply yields `TIMEOUT` readings.
    pub fn read(&mut self, roots: &[u32], wait: Duration) -> Option<Vec<GpuSample>> {
        let State::Ready(n) = self.state else {
            return None;
        };
        let timed_out = || vec![GpuSample::all_failed(GpuError::Timeout); n];
        // A reply still owed from an earlier request: collect it if it came, else skip.
        if let Some(want) = self.outstanding {
            loop {
                match self.rx.try_recv() {
                    Ok(Reply::Read(seq, late)) => {
                        self.keep_late(&late);
                        if seq == want {
                            self.outstanding = None;
                            break;
                        }
                    }
                    Ok(Reply::Base(t, base)) => self.base = Some((t, base)),
                    Ok(_) => continue,
                    Err(TryRecvError::Empty) => return Some(timed_out()),
                    Err(TryRecvError::Disconnected) => {
                        self.state = State::Closed;
                        return Some(timed_out());
                    }
                }
            }
        }
        self.seq += 1;
        let seq = self.seq;
        if self
            .tx
            .send(Req::Read {
                seq,
                roots: roots.to_vec(),
            })
            .is_err()
        {
            self.state = State::Closed;
            return Some(timed_out());
        }
        self.outstanding = Some(seq);
        let deadline = std::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Reply::Read(s, mut samples)) if s == seq => {
                    self.outstanding = None;
                    // Late events go first; a card unreadable now keeps them for later.
                    for (sample, late) in samples.iter_mut().zip(self.late_xids.iter_mut()) {
                        if let Ok(now) = &mut sample.xid_errors {
                            late.append(now);
                            std::mem::swap(now, late);
                        }
                    }
                    for (sample, late) in samples.iter_mut().zip(self.late_idle.iter_mut()) {
                        if let Ok(now) = &mut sample.ledger.idle {
                            now.no_work_us += std::mem::take(&mut late.no_work_us);
                            now.covered_us += std::mem::take(&mut late.covered_us);
                        }
                    }
                    return Some(samples);
                }
                Ok(Reply::Read(_, late)) => self.keep_late(&late),
                Ok(Reply::Base(t, base)) => self.base = Some((t, base)),
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => return Some(timed_out()),
                Err(RecvTimeoutError::Disconnected) => {
                    self.state = State::Closed;
                    return Some(timed_out());
                }
            }
        }
    }
}

impl GpuWorker {
    /// The cards' first reading and its time, once (waits at most `wait` for it): the base
    /// their exact ledger counts from, taken when NVML opened rather than at the next row
    /// (a row's reading can come up to an interval later; a 3-second job lost a third of its
    /// span to that). `None` while it is not there yet, and after it was taken.
    ///
    /// A card's rows are stored in time order (the file packs each as a difference from the
    /// one before), so a base no newer than `stored_after` (the last reading stored: one that
    /// timed out while the base was on the card) is not returned; its events and time with
    /// no work go with the next reading, as a late reply's do.
    pub fn take_base(
        &mut self,
        wait: Duration,
        stored_after: Option<i64>,
    ) -> Option<(i64, Vec<GpuSample>)> {
        if self.base_taken || !self.is_ready() {
            return None;
        }
        if self.base.is_none() && self.outstanding.is_none() {
            match self.rx.recv_timeout(wait) {
                Ok(Reply::Base(t, base)) => self.base = Some((t, base)),
                Ok(Reply::Read(_, late)) => self.keep_late(&late),
                Ok(Reply::Opened(_)) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.state = State::Closed,
            }
        }
        let (t, base) = self.base.take()?;
        self.base_taken = true;
        if stored_after.is_some_and(|last| t <= last) {
            self.keep_late(&base);
            return None;
        }
        Some((t, base))
    }

    fn keep_late(&mut self, late: &[GpuSample]) {
        if self.late_xids.len() < late.len() {
            self.late_xids.resize(late.len(), Vec::new());
            self.late_idle.resize(late.len(), IdleTime::default());
        }
        for (keep, s) in self.late_idle.iter_mut().zip(late) {
            if let Ok(t) = &s.ledger.idle {
                keep.no_work_us += t.no_work_us;
                keep.covered_us += t.covered_us;
            }
        }
        for (keep, s) in self.late_xids.iter_mut().zip(late) {
            if let Ok(x) = &s.xid_errors {
                // Bounded: a card flooding Xids keeps its first events.
                let room = 256usize.saturating_sub(keep.len());
                keep.extend(x.iter().take(room));
            }
        }
    }
}

fn serve(cfg: GpuWorkerConfig, rx: Receiver<Req>, tx: Sender<Reply>) {
    let mut collector =
        match GpuCollector::open_allocated(&cfg.lib_path, &cfg.wanted, cfg.allocated.as_deref()) {
            Ok(mut c) => {
                if let Some(ms) = cfg.ledger_since_unix_ms {
                    c.count_ledger_from(ms.saturating_mul(1000));
                }
                let _ = tx.send(Reply::Opened(Ok((c.cards(), c.topology()))));
                c
            }
            Err(e) => {
                let _ = tx.send(Reply::Opened(Err(e)));
                return;
            }
        };
    let mut memo = pids::JobPids::default();
    // One reading of the cards, crediting the processes that descend from `roots`.
    let mut read = |roots: &[u32]| {
        let samples = collector.read(&mut |pid| memo.owns(&cfg.proc_root, cfg.job_id, roots, pid));
        memo.end_reading();
        samples
    };
    // The base reading, at once: the step's processes descend from this slurmstepd.
    let t = crate::sys::now_unix_ms();
    if tx
        .send(Reply::Base(t, read(&[std::process::id()])))
        .is_err()
    {
        return;
    }
    // The sender side is dropped when the sampler ends: then NVML shuts down here.
    while let Ok(Req::Read { seq, roots }) = rx.recv() {
        if tx.send(Reply::Read(seq, read(&roots))).is_err() {
            break;
        }
    }
}
