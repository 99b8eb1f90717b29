//! The step's sampler: one thread per recorded step, started in `init_post_opt`, told the
//! tasks' pids at each `task_post_fork` (the step's cgroup is found from the first one's
//! `/proc/<pid>/cgroup`, else from slurmstepd's own), handed the last reading that the last
//! `task_exit` takes itself (Slurm removes the step cgroup before `slurm_spank_exit`), and
//! joined in `slurm_spank_exit`.
//!
//! The thread runs inside slurmstepd, which has moved itself into the job's cgroup: its CPU,
//! heap and SQLite page cache are charged to the job. So it reads a handful of small files per
//! tick, keeps one small buffer, and records its own CPU time and bytes written in every row.
//!
//! It never calls Slurm's API or logs (see `log`): problems travel back to the callback
//! thread as strings and are logged there.

use slurmwatch_recorder::collect::gpu::worker::{GpuWorker, GpuWorkerConfig, Opened};
use slurmwatch_recorder::collect::gpu::Wanted;
use slurmwatch_recorder::collect::{is_this_jobs_key, JobCollector, CGROUP_ROOT, PROC_ROOT};
use slurmwatch_recorder::model::between::BetweenRows;
use slurmwatch_recorder::model::{SampleKind, SampleRow, Series};
use slurmwatch_recorder::recording::cadence::Cadence;
use slurmwatch_recorder::recording::gpus as gpu_notes;
use slurmwatch_recorder::recording::output::OutputNotes;
use slurmwatch_recorder::recording::rows::{stored_row, Peers, Reads, RowSchedule, SamplerCost};
use slurmwatch_recorder::recording::step::{existing_file, ExistingFile};
use slurmwatch_recorder::sample::{GpuSample, Source, UsageReading};
use slurmwatch_recorder::store::{paths, JobMeta, Writer};
use slurmwatch_recorder::sys::now_unix_ms;
use slurmwatch_recorder::sys::thread_cpu_usec;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

// The read, store, flush and archive cadence and which series a row stores are
// `slurmwatch_recorder::recording`'s (unit-tested there); this file is the thread around them.
/// How long `task_exit` and `exit` wait for the sampler before leaving it behind.
const FINAL_WAIT: Duration = Duration::from_secs(2);
/// The longest the sampler waits for one archive copy (it runs on a thread of its own).
const ARCHIVE_WAIT: Duration = Duration::from_secs(5);
/// The longest a stored row waits for the GPU readings (NVML runs on its own thread; a
/// late answer is recorded as TIMEOUT). Well inside FINAL_WAIT.
const GPU_READ_WAIT: Duration = Duration::from_millis(500);
/// The longest the step's end waits for an output-size read in flight.
const OUTPUT_LAST_WAIT: Duration = Duration::from_millis(50);

/// The job's GPUs for this step: the site's NVML library and the cards the step's
/// environment names (see `collect::gpu::select`).
#[derive(Debug, Clone)]
pub struct GpuPlan {
    pub lib_path: PathBuf,
    pub wanted: Vec<Wanted>,
    /// Slurm's GRES indices for the job on this node: no other card is opened.
    pub allocated: Vec<u32>,
}

/// What the callbacks know about the step when recording starts.
#[derive(Debug, Clone)]
pub struct Plan {
    pub job_id: u32,
    pub step: String,
    pub interval: Duration,
    pub uid: u32,
    pub gid: u32,
    pub user: String,
    pub node: String,
    pub file: PathBuf,
    /// The archive directory (expanded from the site's template), written as the user.
    pub archive_dir: Option<crate::archive::ArchiveDir>,
    /// The node's spool (root-only): where `file` is, and where archive snapshots are made.
    pub spool: PathBuf,
    /// Recording stops when the file reaches this size (plugstack `max_file_mb=`).
    pub max_file_bytes: u64,
    pub cores_allocated: Option<u32>,
    pub memory_allocated_bytes: Option<u64>,
    pub local_tasks: Option<u32>,
    /// Whether this step also records the job-level series, before the steps table is read
    /// (the batch or interactive step; once begun, `store::claims_job_series` decides).
    pub records_job_series: bool,
    /// `None`: the step's environment names no GPU (no GPU section, NVML never loaded).
    pub gpu: Option<GpuPlan>,
    /// The default but in test builds (see `test_locate`).
    pub locate_test: LocateTest,
}

/// How a test build locates the step's cgroup: after a wait, and perhaps from the task only.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocateTest {
    pub delay: Duration,
    pub task_only: bool,
}

enum Msg {
    AddTask(u32),
    /// A phase mark from the job's own processes (see `marks`).
    Mark(crate::marks::Mark),
    /// A line for the file's events (e.g. the marks refused).
    Note(String),
    /// The last task's end: its wait status and the last reading, taken by `task_exit`
    /// itself (`None` when it could not be: the sampler then reads).
    Final {
        exit_status: Option<i32>,
        end: Option<Box<Taken>>,
    },
    Stop,
}

/// One reading of the job and the step at one moment.
struct Taken {
    t_unix_ms: i64,
    job: Option<UsageReading>,
    step: Option<UsageReading>,
}

impl Taken {
    fn read(c: &mut JobCollector, reads: Reads) -> Taken {
        Taken {
            t_unix_ms: now_unix_ms(),
            job: reads.job.then(|| c.read_job()),
            step: reads.step.then(|| c.read_step()),
        }
    }
}

/// Both series: what a boundary reading taken before the file is open takes.
const BOTH: Reads = Reads {
    job: true,
    step: true,
};

/// The step's collector, shared by the sampler and the last `task_exit`: whichever comes
/// first locates the step's cgroup and takes the start reading, so `task_exit` never waits
/// for the sampler to open the job's file. `task_exit` then takes the last reading itself
/// (the step's cgroup is removed soon after) and goes on: a `srun true` waited 3–6 ms there
/// for the sampler to open the file and store its first rows.
struct Located {
    collector: Option<JobCollector>,
    /// The start reading, until the sampler stores it.
    start: Option<Taken>,
    /// CPU µs the callback threads spent reading for the sampler (counted as its own);
    /// `None` once a callback's own CPU time could not be read, so the sum is unknown.
    callback_cpu_usec: Option<u64>,
}

impl Default for Located {
    fn default() -> Located {
        Located {
            collector: None,
            start: None,
            callback_cpu_usec: Some(0),
        }
    }
}

impl Located {
    /// The sampler's: locates the step (falling back to /proc) if `task_exit` has not.
    fn ensure(&mut self, job_id: u32, first_task_pid: u32, test: LocateTest) -> &mut JobCollector {
        if self.collector.is_none() {
            let (cgroups, procs) = (Path::new(CGROUP_ROOT), Path::new(PROC_ROOT));
            // This thread is in the step's slurmstepd: its group is the fallback for a task
            // already reaped, whose /proc/<pid>/cgroup is gone.
            let c = if test.task_only {
                JobCollector::new(cgroups, procs, first_task_pid, job_id)
            } else {
                JobCollector::for_step(cgroups, procs, first_task_pid, std::process::id(), job_id)
            };
            self.install(c);
        }
        self.collector.as_mut().expect("located above")
    }

    /// `task_exit`'s: the collector only where its readings are cgroup files. A /proc
    /// collector is left to the sampler: its scan and readings read other processes' /proc
    /// files, which a user's process can hold up, and slurmstepd's callback must not wait.
    fn in_cgroup(&mut self, first_task_pid: u32, test: LocateTest) -> Option<&mut JobCollector> {
        if self.collector.is_none() && !test.task_only {
            let (cgroups, procs) = (Path::new(CGROUP_ROOT), Path::new(PROC_ROOT));
            let pid = std::process::id();
            self.install(JobCollector::in_cgroup(
                cgroups,
                procs,
                first_task_pid,
                pid,
            )?);
        }
        self.collector.as_mut().filter(|c| !c.reads_proc())
    }

    /// Takes the start reading with the collector's first use.
    fn install(&mut self, mut c: JobCollector) {
        self.start = Some(Taken::read(&mut c, BOTH));
        self.collector = Some(c);
    }
}

type Shared = Arc<Mutex<Located>>;

/// The shared collector, or `None` if another thread held it past `wait`.
fn lock_within(shared: &Shared, wait: Duration) -> Option<MutexGuard<'_, Located>> {
    let end = Instant::now() + wait;
    loop {
        match shared.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < end => {
                std::thread::sleep(Duration::from_micros(200))
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// The handle the callbacks keep.
pub struct Recorder {
    tx: Sender<Msg>,
    done: Receiver<Result<String, String>>,
    thread: Option<JoinHandle<()>>,
    pub tasks_exited: u32,
    shared: Shared,
    locate_test: LocateTest,
    first_task_pid: Option<u32>,
    marks: Option<crate::marks::Listener>,
}

impl Recorder {
    /// Starts the sampler thread in `init_post_opt`, before any task exists, so that
    /// `task_post_fork` only passes pids (it holds the task until it returns). The file is
    /// opened once the first task's pid tells where its cgroup is. Measured on the 2-core
    /// test VM, `srun true` in a loop: the callbacks' waits went from post_fork 2–6 ms +
    /// task_exit 4–8 ms to 0–2 + 3–6 ms; `task_exit` now waits only for a reading (see
    /// `Located`).
    pub fn start(plan: Plan) -> Result<Recorder, String> {
        let (tx, rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let shared = Shared::default();
        let locate_test = plan.locate_test;
        let located = shared.clone();
        let thread = std::thread::Builder::new()
            .name("slurmwatch".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                crate::state::mark_sampler_thread();
                batch_scheduling();
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run(plan, located, rx)
                }))
                .unwrap_or_else(|p| {
                    let msg = crate::guard::panic_text(p.as_ref()).unwrap_or_default();
                    Err(format!("internal error (panic in the sampler): {msg}"))
                });
                let _ = done_tx.send(result);
            })
            .map_err(|e| format!("cannot start the sampler thread: {e}"))?;
        Ok(Recorder {
            tx,
            done,
            thread: Some(thread),
            tasks_exited: 0,
            shared,
            locate_test,
            first_task_pid: None,
            marks: None,
        })
    }

    /// Opens the step's mark socket at `path` for the job's user; its path is what the
    /// tasks are told. Recording goes on without marks when this fails.
    pub fn take_marks(&mut self, path: PathBuf, uid: u32, gid: u32) -> Result<(), String> {
        let owner = crate::marks::Owner { uid, gid };
        self.marks = Some(crate::marks::Listener::start(
            path,
            owner,
            self.tx.clone(),
            Msg::Mark,
        )?);
        Ok(())
    }

    /// Stops taking marks (the socket is removed) and hands the sampler what was refused.
    fn end_marks(&mut self) {
        if let Some(mut m) = self.marks.take() {
            let _ = m.stop();
            if let Some(text) = m.refused.text() {
                let _ = self.tx.send(Msg::Note(text));
            }
        }
    }

    pub fn add_task(&mut self, pid: u32) {
        self.first_task_pid.get_or_insert(pid);
        let _ = self.tx.send(Msg::AddTask(pid));
    }

    /// The last reading, taken here while the step's cgroup still exists (locating it
    /// first if the sampler has not yet), and handed to the sampler to store. Waits only
    /// for a reading the sampler may be taking (bounded), never for the file. Without a
    /// cgroup the sampler takes it (see `Located::in_cgroup`).
    pub fn final_reading(&mut self, exit_status: Option<i32>) {
        self.end_marks();
        let cpu_before = thread_cpu_usec();
        let end = self.first_task_pid.and_then(|pid| {
            let mut slot = lock_within(&self.shared, FINAL_WAIT)?;
            let taken = Taken::read(slot.in_cgroup(pid, self.locate_test)?, BOTH);
            let spent = thread_cpu_usec()
                .zip(cpu_before)
                .map(|(a, b)| a.saturating_sub(b));
            slot.callback_cpu_usec = sampler_cpu_usec(slot.callback_cpu_usec, spent);
            Some(Box::new(taken))
        });
        let _ = self.tx.send(Msg::Final { exit_status, end });
    }

    /// Stops the sampler and returns its outcome (a summary line, or the problem). A sampler
    /// stuck past the bounded wait is left behind rather than blocking the step's end.
    pub fn stop(mut self) -> Result<String, String> {
        self.end_marks();
        let _ = self.tx.send(Msg::Stop);
        match self.done.recv_timeout(FINAL_WAIT) {
            Ok(result) => {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
                result
            }
            Err(_) => Err("the sampler did not stop in time; left it behind".into()),
        }
    }
}

/// The sampler never preempts slurmstepd or the job's tasks when it wakes: `SCHED_BATCH`
/// keeps its CPU share (nice 0) and gives up wake-up preemption (sched(7)). Without it, on a
/// 2-core node, the woken sampler opening the job's file held `task_post_fork` for 3–5 ms.
fn batch_scheduling() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a valid pointer; pid 0 is the calling thread.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
}

/// Bytes the sampler thread has passed to write(2): `wchar` of its /proc/thread-self/io,
/// opened once by the thread itself (the name resolves to the opening thread) and re-read
/// with one pread per row — a procfs open and close every row cost more than the read.
struct ThreadIo(Option<std::fs::File>);

impl ThreadIo {
    fn open() -> ThreadIo {
        ThreadIo(std::fs::File::open("/proc/thread-self/io").ok())
    }

    fn bytes_written(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 512];
        let n = self.0.as_ref()?.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n])
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("wchar:"))
            .and_then(|v| v.trim().parse().ok())
    }
}

/// The sampler's CPU µs from its parts: known only when every part was read (a part that
/// could not be is never counted as 0).
fn sampler_cpu_usec(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    a.zip(b).map(|(a, b)| a + b)
}

/// A stored row of `series` with this interval's between-row maxima and the sampler's cost.
/// `callback_cpu_usec`: what the callbacks spent reading for the sampler, added to its own.
fn take_row(
    between: &mut BetweenRows,
    (t_ms, series, kind): (i64, Series, SampleKind),
    r: UsageReading,
    cores_allocated: Option<u32>,
    (callback_cpu_usec, io): (Option<u64>, &ThreadIo),
) -> SampleRow {
    let cost = SamplerCost {
        cpu_usec: sampler_cpu_usec(thread_cpu_usec(), callback_cpu_usec),
        bytes_written: io.bytes_written(),
    };
    stored_row(t_ms, series, kind, r, between.take(), cores_allocated, cost)
}

/// Copies the job's file to the archive with the user's credentials (see `as_user`). The
/// copy is made through the writer's own connection: this process must never open and close
/// the file by name while it writes it (POSIX locks: see `Writer::snapshot`).
fn archive(plan: &Plan, writer: &Writer) -> Option<String> {
    let dir = plan.archive_dir.as_ref()?;
    let name = crate::archive::file_name(plan.job_id, &plan.node);
    crate::archive::copy_as_user(
        writer.snapshot(&plan.spool, plan.job_id),
        dir,
        &name,
        (plan.uid, plan.gid),
        ARCHIVE_WAIT,
    )
    .err()
}

/// Moves a file that is in the way (an earlier job's with the same id, or one an older
/// slurmwatch handed to its user) aside inside the root-owned spool, its WAL with it.
fn move_aside(file: &std::path::Path) -> Result<(), String> {
    let aside = paths::stale_path(file, now_unix_ms());
    std::fs::rename(file, &aside)
        .map_err(|e| format!("not recording: cannot move an earlier job's file aside: {e}"))?;
    // Its WAL travels with it (it may hold rows not yet checkpointed).
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::rename(paths::sidecar(file, suffix), paths::sidecar(&aside, suffix));
    }
    Ok(())
}

/// A regular file at `path` that this process's user does not own or others can write:
/// never opened, only moved aside (see `Writer::open_existing`).
fn foreign_file(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_file() && (m.uid() != euid || m.mode() & 0o022 != 0))
}

/// How long a step waits for another step of the same job that is creating the file.
const CREATE_RACE_WAIT: Duration = Duration::from_millis(100);
const CREATE_RACE_TRIES: u32 = 10;

/// Creates the job's file, or joins the one an earlier step of *this* job made. A file left
/// by an earlier job with the same id (another user's, or another incarnation) is moved
/// aside inside the root-owned spool, never written into; anything unreadable is left alone
/// and this step is not recorded.
fn open_job_file(plan: &Plan, meta: &JobMeta) -> Result<Writer, String> {
    let mut tries = 0;
    loop {
        let create_err = match Writer::create_readable_by(&plan.file, meta, plan.uid) {
            Ok(w) => return Ok(w),
            Err(e) => e,
        };
        if foreign_file(&plan.file) {
            move_aside(&plan.file)?;
            tries += 1;
            continue;
        }
        match Writer::open_existing(&plan.file) {
            Ok(mut w) => {
                w.grant_reader(plan.uid);
                let uid = w.meta_value("uid").ok().flatten();
                let incarnation = w.meta_value("incarnation").ok().flatten();
                let continues = || {
                    incarnation.as_deref().is_some_and(|k| {
                        let (cgroups, procs) = (Path::new(CGROUP_ROOT), Path::new(PROC_ROOT));
                        is_this_jobs_key(k, cgroups, procs, plan.job_id)
                    }) || w.steps().is_ok_and(|s| {
                        slurmwatch_recorder::store::continues_the_job(&plan.step, &s, now_unix_ms())
                    })
                };
                let mine = (plan.uid, meta.incarnation.as_deref());
                match existing_file(uid.as_deref(), incarnation.as_deref(), mine, continues) {
                    ExistingFile::Join => return Ok(w),
                    ExistingFile::MoveAside => {
                        drop(w);
                        move_aside(&plan.file)?;
                    }
                }
            }
            // Another step of this job may be creating it right now: wait a little.
            Err(_) if tries < CREATE_RACE_TRIES => std::thread::sleep(CREATE_RACE_WAIT),
            Err(e) => return Err(format!("not recording: {create_err}; {e}")),
        }
        tries += 1;
        if tries > CREATE_RACE_TRIES + 1 {
            return Err("not recording: cannot create the job's file".into());
        }
    }
}

/// The GPU side of the sampler: NVML opens on its own thread while the step runs; once the
/// cards are known they are registered in the file and read with every stored row.
struct Gpus {
    worker: GpuWorker,
    /// `gpus.id` of each card this step records (`None`: another step records it).
    ids: Option<Vec<Option<i64>>>,
    /// The time of the last reading stored: a card's rows go in time order.
    last_stored_ms: Option<i64>,
}

impl Gpus {
    fn start(plan: &Plan, started_unix_ms: i64) -> Option<Gpus> {
        let g = plan.gpu.as_ref()?;
        Some(Gpus {
            worker: GpuWorker::start(GpuWorkerConfig {
                lib_path: g.lib_path.clone(),
                wanted: g.wanted.clone(),
                allocated: Some(g.allocated.clone()),
                proc_root: PathBuf::from(PROC_ROOT),
                job_id: plan.job_id,
                ledger_since_unix_ms: u64::try_from(started_unix_ms).ok(),
            }),
            ids: None,
            last_stored_ms: None,
        })
    }

    /// Registers the cards once NVML has opened (never waits); records why there are none.
    fn poll_open(this: &mut Option<Gpus>, writer: &mut Writer, step: &str) {
        let Some(g) = this else { return };
        if g.ids.is_some() {
            return;
        }
        match g.worker.poll_open(Duration::ZERO) {
            Opened::Pending => {}
            Opened::Ready { cards, topology } => {
                let t = now_unix_ms();
                match writer.register_gpus(step, t, &cards, &topology) {
                    Ok(ids) => {
                        let text = gpu_notes::registered_text(&cards, &ids);
                        let _ = writer.event(t, Some(step), "gpu", &text);
                        g.ids = Some(gpu_notes::recorded_ids(ids));
                    }
                    Err(e) => {
                        let _ =
                            writer.event(t, Some(step), "gpu", &format!("not recording GPUs: {e}"));
                        *this = None;
                    }
                }
            }
            Opened::None(why) => {
                let _ = writer.event(
                    now_unix_ms(),
                    Some(step),
                    "gpu",
                    &format!("no GPU section: {why}"),
                );
                *this = None;
            }
        }
    }

    /// One reading of every card this step records, buffered with the row at `t`.
    fn store(this: &mut Option<Gpus>, writer: &mut Writer, step: &str, t: i64) {
        Gpus::poll_open(this, writer, step);
        let Some(g) = this else { return };
        if g.ids
            .as_ref()
            .is_none_or(|ids| ids.iter().all(Option::is_none))
        {
            return;
        }
        // The base first (it is older than any reading), also when it came during the read.
        g.store_base(writer);
        // The step's processes descend from this slurmstepd (used where there is no job
        // cgroup to tell the job's processes from a neighbour's).
        let roots = [std::process::id()];
        if let Some(samples) = g.worker.read(&roots, GPU_READ_WAIT) {
            g.store_base(writer);
            // After the base (its time can be a moment past the row's: NVML opened between).
            let t = g.last_stored_ms.map_or(t, |last| t.max(last + 1));
            g.push(writer, t, samples);
        }
    }

    /// The cards' base reading, taken by the worker when NVML opened, stored at its own time
    /// once it is there (never waits): the exact ledger counts from it.
    fn store_base(&mut self, writer: &mut Writer) {
        if self.ids.is_none() {
            return;
        }
        if let Some((t, samples)) = self.worker.take_base(Duration::ZERO, self.last_stored_ms) {
            self.push(writer, t, samples);
        }
    }

    /// Buffers one reading of the cards this step records (registered: `ids` is known).
    fn push(&mut self, writer: &mut Writer, t: i64, samples: Vec<GpuSample>) {
        let ids = self.ids.as_deref().unwrap_or_default();
        for (id, s) in ids.iter().zip(samples) {
            if let Some(id) = id {
                writer.push_gpu(t, *id, s);
            }
        }
        self.last_stored_ms = Some(t);
    }
}

/// The file's meta for this step's job (the first step on the node writes it).
fn job_meta(
    plan: &Plan,
    source: Source,
    started_unix_ms: i64,
    incarnation: Option<String>,
) -> JobMeta {
    JobMeta {
        job_id: u64::from(plan.job_id),
        user: plan.user.clone(),
        uid: plan.uid,
        node: plan.node.clone(),
        cluster: None,
        plugin_version: env!("CARGO_PKG_VERSION").to_string(),
        interval_seconds: plan.interval.as_secs() as u32,
        source,
        cores_allocated: plan.cores_allocated,
        memory_allocated_bytes: plan.memory_allocated_bytes,
        started_unix_ms,
        incarnation,
    }
}

/// The sampler thread's state while the step runs.
struct Sampler {
    plan: Plan,
    writer: Writer,
    located: Shared,
    schedule: RowSchedule,
    job_between: BetweenRows,
    step_between: BetweenRows,
    gpus: Option<Gpus>,
    io: ThreadIo,
    rows: u64,
    /// The first problem met; the summary line says it.
    problem: Option<String>,
    /// The last reading is stored and the step's end noted.
    finished: bool,
    /// Past the file's cap nothing more is stored; the step's end is still noted (within
    /// the slack).
    capped: bool,
    /// The batch step's: its script's output sizes, read beside the rows (`output_size`).
    output: Option<(u32, crate::output_size::OutputWatch, OutputNotes)>,
    /// The output reads' thread's CPU µs as of its last answer (`Some(0)` before one, or
    /// without the thread; `None` once it could not be read: the sum is then unknown).
    output_cpu_usec: Option<u64>,
}

impl Sampler {
    /// Opens (or joins) the job's file and begins this step in it.
    fn open(plan: Plan, located: Shared, first_task_pid: u32) -> Result<Sampler, String> {
        let started = now_unix_ms();
        std::thread::sleep(plan.locate_test.delay);
        let (incarnation, source) = {
            let mut slot = lock_within(&located, FINAL_WAIT)
                .ok_or("not recording: the step's last task_exit held the collector")?;
            let c = slot.ensure(plan.job_id, first_task_pid, plan.locate_test);
            (c.incarnation(Path::new(PROC_ROOT)), c.source())
        };
        let meta = job_meta(&plan, source, started, incarnation);
        let mut writer = open_job_file(&plan, &meta)?;
        let _ = writer.set_cap(plan.max_file_bytes);
        if let Some(Err(why)) = writer.reader_grant() {
            let _ = writer.event(
                started,
                Some(&plan.step),
                "problem",
                &format!("the job's user cannot read the live file on this node ({why}); the archive copy and the report after the job still work"),
            );
        }
        writer
            .begin_step(&plan.step, started, plan.local_tasks)
            .map_err(|e| e.to_string())?;
        // Every node's file gets its job series, not only the batch node's (see the rule).
        let records_job_series = writer
            .claims_job_series(&plan.step)
            .unwrap_or(plan.records_job_series);
        // NVML starts loading now, on its own thread; nothing here waits for it.
        let gpus = Gpus::start(&plan, started);
        let output = (plan.step == "batch")
            .then(crate::output_size::OutputWatch::start)
            .flatten()
            .map(|w| (first_task_pid, w, OutputNotes::default()));
        Ok(Sampler {
            plan,
            writer,
            located,
            schedule: RowSchedule::new(records_job_series),
            job_between: BetweenRows::default(),
            step_between: BetweenRows::default(),
            gpus,
            io: ThreadIo::open(),
            rows: 0,
            problem: None,
            finished: false,
            capped: false,
            output,
            output_cpu_usec: Some(0),
        })
    }

    fn note(&mut self, problem: String) {
        self.problem.get_or_insert(problem);
    }

    fn peers(&self, t_ms: i64) -> Peers {
        Peers {
            job_series_writer_running: self.writer.has_job_series_writer(t_ms),
            step_row_wanted: self.writer.step_row_wanted(&self.plan.step, t_ms),
        }
    }

    /// The shared collector (held by the last `task_exit` for one reading at most).
    fn collector(&self) -> Option<MutexGuard<'_, Located>> {
        lock_within(&self.located, FINAL_WAIT)
    }

    /// Buffers the rows of `kind` that the schedule keeps, from `taken` (a boundary reading
    /// taken earlier) or from a reading now, and the GPUs.
    fn store(&mut self, kind: SampleKind, taken: Option<Taken>) {
        let t = taken.as_ref().map_or_else(now_unix_ms, |r| r.t_unix_ms);
        let reads = self.schedule.stored(kind, self.peers(t));
        self.store_reads(kind, taken, reads);
    }

    /// A phase mark: a row of the counters now, of every series this step would store, and
    /// the label beside it (`mark` event at the row's time), so each phase's figures are
    /// differences of exact readings.
    fn mark(&mut self, mark: crate::marks::Mark) {
        if self.finished || self.capped {
            return;
        }
        let taken = self.collector().and_then(|mut slot| {
            let reads = self.schedule.fast(self.peers(mark.t_unix_ms));
            let c = slot.collector.as_mut()?;
            Some((reads, Taken::read(c, reads)))
        });
        let Some((reads, taken)) = taken else { return };
        let t = taken.t_unix_ms;
        self.store_reads(SampleKind::Periodic, Some(taken), reads);
        let _ = self
            .writer
            .event(t, Some(&self.plan.step), "mark", &mark.label);
    }

    fn store_reads(&mut self, kind: SampleKind, taken: Option<Taken>, reads: Reads) {
        let t = taken.as_ref().map_or_else(now_unix_ms, |r| r.t_unix_ms);
        let Some(mut slot) = self.collector() else {
            return self.note("a reading waited too long for the collector".into());
        };
        let callback_cpu_usec = sampler_cpu_usec(slot.callback_cpu_usec, self.output_cpu_usec);
        let taken = match (taken, slot.collector.as_mut()) {
            (Some(r), _) => r,
            (None, Some(c)) => Taken::read(c, reads),
            (None, None) => return,
        };
        drop(slot);
        let Taken { job, step, .. } = taken;
        let cost = (callback_cpu_usec, &self.io);
        let cores = self.plan.cores_allocated;
        if let Some(r) = job.filter(|_| reads.job) {
            self.job_between.observe(t, &r);
            let at = (t, Series::Job, kind);
            let row = take_row(&mut self.job_between, at, r, cores, cost);
            self.writer.push(row);
        }
        if let Some(r) = step.filter(|_| reads.step) {
            self.step_between.observe(t, &r);
            let at = (t, Series::step(self.plan.step.clone()), kind);
            let row = take_row(&mut self.step_between, at, r, cores, cost);
            self.writer.push(row);
        }
        Gpus::store(&mut self.gpus, &mut self.writer, &self.plan.step, t);
        self.note_output(Duration::ZERO);
        self.rows += 1;
    }

    /// The output sizes read since the last row (asking for the next read), noted where
    /// they changed. Waits at most `wait` for a read in flight.
    fn note_output(&mut self, wait: Duration) {
        let Some((pid, watch, notes)) = self.output.as_mut() else {
            return;
        };
        if let Some(seen) = watch.poll(*pid, wait) {
            self.output_cpu_usec = seen.thread_cpu_usec;
            for size in notes.at_row(seen.t_unix_ms, seen.out, seen.err) {
                self.writer.push_output_size(size);
            }
        }
    }

    /// A fast read: only the running maxima, nothing stored.
    fn fast_read(&mut self) {
        Gpus::poll_open(&mut self.gpus, &mut self.writer, &self.plan.step);
        if let Some(g) = self.gpus.as_mut() {
            g.store_base(&mut self.writer);
        }
        let t = now_unix_ms();
        let reads = self.schedule.fast(self.peers(t));
        let Some(mut slot) = lock_within(&self.located, FINAL_WAIT) else {
            return;
        };
        let Some(c) = slot.collector.as_mut() else {
            return;
        };
        if reads.job {
            let seen = self.job_between.working_set_max_bytes();
            self.job_between.observe(t, &c.read_job_fast(seen));
        }
        if reads.step {
            let seen = self.step_between.working_set_max_bytes();
            self.step_between.observe(t, &c.read_step_fast(seen));
        }
    }

    fn flush(&mut self) {
        if let Err(e) = self.writer.flush() {
            self.note(e.to_string());
        }
    }

    fn archive(&mut self) {
        if let Some(p) = archive(&self.plan, &self.writer) {
            self.note(p);
        }
    }

    /// The last task's end: the last reading (`task_exit`'s, else one now), the step's end,
    /// then the archive copy (bounded by ARCHIVE_WAIT).
    fn finish(&mut self, exit_status: Option<i32>, end: Option<Taken>) {
        if self.finished {
            return;
        }
        if !self.capped {
            // The script's last output: the read in flight, within a short bound, and the
            // last size seen, noted or not.
            self.note_output(OUTPUT_LAST_WAIT);
            if let Some((_, _, notes)) = self.output.as_mut() {
                for size in notes.finish() {
                    self.writer.push_output_size(size);
                }
            }
            self.store(SampleKind::End, end);
        }
        let _ = self
            .writer
            .end_step(&self.plan.step, now_unix_ms(), exit_status);
        self.flush();
        self.archive();
        self.finished = true;
    }

    /// No message came within the cadence's wait: a stored row or a fast read, then the
    /// archive copy and the flush when they are due.
    fn tick(&mut self, cadence: &mut Cadence) {
        if self.finished || self.capped {
            return;
        }
        if cadence.take_store(Instant::now()) {
            self.store(SampleKind::Periodic, None);
        } else {
            self.fast_read();
        }
        if cadence.archive_due(Instant::now()) {
            let _ = self.writer.flush();
            self.archive();
            cadence.archived(Instant::now());
        }
        if cadence.flush_due(Instant::now(), self.writer.buffered()) {
            self.flush();
            cadence.flushed(Instant::now());
            if self.writer.capped() {
                self.capped = true;
                let cap_kib = self.plan.max_file_bytes >> 10;
                self.note(format!(
                    "recording stopped at the file's cap of {cap_kib} KiB"
                ));
            }
        }
    }

    /// Notes the step's end if no final reading came, and closes the file.
    fn close(self) -> Result<String, String> {
        let Sampler {
            plan,
            mut writer,
            rows,
            problem,
            finished,
            ..
        } = self;
        if !finished {
            let _ = writer.end_step(&plan.step, now_unix_ms(), None);
        }
        writer.flush().map_err(|e| e.to_string())?;
        writer.close().map_err(|e| e.to_string())?;
        match problem {
            Some(p) => Err(format!("recorded {rows} samples with a problem: {p}")),
            None => Ok(format!("{rows} samples into {}", plan.file.display())),
        }
    }
}

fn run(plan: Plan, located: Shared, rx: Receiver<Msg>) -> Result<String, String> {
    let first_task_pid = loop {
        match rx.recv() {
            Ok(Msg::AddTask(pid)) => break pid,
            // Never sent before a task (a mark comes from one).
            Ok(Msg::Final { .. } | Msg::Mark(_) | Msg::Note(_)) => {}
            Ok(Msg::Stop) | Err(_) => {
                return Ok("no task started on this node: nothing recorded".into())
            }
        }
    };
    let mut s = Sampler::open(plan, located, first_task_pid)?;
    let start = s.collector().and_then(|mut slot| slot.start.take());
    s.store(SampleKind::Start, start);
    s.problem = s.writer.flush().err().map(|e| e.to_string());
    let mut cadence = Cadence::new(s.plan.interval, Instant::now());
    loop {
        match rx.recv_timeout(cadence.wait(Instant::now())) {
            Ok(Msg::AddTask(pid)) => {
                if let Some(c) = s.collector().as_mut().and_then(|g| g.collector.as_mut()) {
                    c.add_task_pid(pid);
                }
            }
            Ok(Msg::Mark(m)) => s.mark(m),
            Ok(Msg::Note(text)) => {
                let _ = s
                    .writer
                    .event(now_unix_ms(), Some(&s.plan.step), "marks", &text);
            }
            Ok(Msg::Final { exit_status, end }) => {
                s.finish(exit_status, end.map(|b| *b));
                // Nothing more is stored: close now, while slurmstepd reports the tasks'
                // exit, not in `slurm_spank_exit`, which holds back the step's completion
                // message to slurmctld and with it the next step of the allocation (the
                // close's checkpoint and journal switch cost fsyncs).
                break;
            }
            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => s.tick(&mut cadence),
        }
    }
    s.close()
}

#[cfg(test)]
mod tests {
    use super::sampler_cpu_usec;

    #[test]
    fn a_cpu_part_that_could_not_be_read_leaves_the_sum_unknown() {
        assert_eq!(sampler_cpu_usec(Some(3_000), Some(250)), Some(3_250));
        assert_eq!(sampler_cpu_usec(Some(3_000), None), None);
        assert_eq!(sampler_cpu_usec(None, Some(0)), None);
    }
}
