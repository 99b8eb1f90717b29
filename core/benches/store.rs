//! Store costs: CPU per stored sample (push + amortized flush) and the size of a 7-day file.
//!
//! `cargo bench -p slurmwatch-core --bench store -- --quick` prints the 7-day sizes first,
//! then criterion's timing of one flush of 12 buffered rows. `STORE_BENCH_KEEP=/tmp/x` keeps
//! each 7-day file as `/tmp/x-<busy><srun>.db` (e.g. for `dbstat`).

use std::time::Instant;

use criterion::{Criterion, Throughput};
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::recording::output::{FileSeen, OutputNotes};
use slurmwatch_core::recording::rows::STEP_ROW_EVERY;
use slurmwatch_core::sample::{Pressure, Source, UsageReading};
use slurmwatch_core::store::{JobMeta, Reader, Writer};

const T0: i64 = 1_700_000_000_000;
const ROWS_7_DAYS: u64 = 7 * 24 * 3600 / 5; // 120,960
const FLUSH_EVERY: u64 = 12; // one transaction a minute at 5 s

fn meta() -> JobMeta {
    JobMeta {
        job_id: 4242,
        user: "alice".into(),
        uid: 1000,
        node: "node1".into(),
        cluster: Some("cluster".into()),
        plugin_version: "0.1.0".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: Some(8),
        memory_allocated_bytes: Some(32 << 30),
        started_unix_ms: T0,
        incarnation: Some("boot:1".into()),
    }
}

/// Deterministic noise (xorshift), so runs compare.
struct Noise(u64);
impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A job's counters over time. `busy`: ~6 of 8 cores, a 20 GiB working set that moves by up
/// to ±100 MiB between samples, 10 MB/s read, nonzero PSI — a harsh case for the encoding.
/// Otherwise: one core, a steady 2 GiB, little I/O, PSI zero.
struct Job {
    busy: bool,
    n: Noise,
    cpu: u64,
    user: u64,
    sys: u64,
    io_r: u64,
    io_w: u64,
    majflt: u64,
    peak: u64,
    s_cpu: u64,
    s_bytes: u64,
    /// PSI stall totals, µs: some and full, for cpu and io.
    stall: [u64; 4],
}

impl Job {
    fn new(busy: bool) -> Job {
        Job {
            busy,
            n: Noise(0x9E37_79B9_7F4A_7C15),
            cpu: 0,
            user: 0,
            sys: 0,
            io_r: 0,
            io_w: 0,
            majflt: 0,
            peak: 0,
            s_cpu: 0,
            s_bytes: 0,
            stall: [0; 4],
        }
    }

    fn next(&mut self, i: u64, series: Series) -> SampleRow {
        let n = &mut self.n;
        let (cores_x10, ws_base, ws_jitter_mib, io_mb_s) = if self.busy {
            (60, 20u64 << 30, 100, 10)
        } else {
            (10, 2u64 << 30, 1, 0)
        };
        let d = 500_000 * cores_x10 * (90 + n.below(21)) / 100;
        self.cpu += d;
        self.user += d * 9 / 10;
        self.sys += d - d * 9 / 10;
        let page = 4096;
        let ws = (ws_base + n.below(2 * ws_jitter_mib + 1) * (1 << 20)) / page * page;
        let cache = ((5u64 << 30) + n.below(21) * (1 << 20)) / page * page;
        let usage = ws + cache;
        self.peak = self.peak.max(usage);
        self.io_r += io_mb_s * 5_000_000 * (50 + n.below(101)) / 100;
        self.io_w += io_mb_s * 500_000 * (50 + n.below(101)) / 100;
        if n.below(20) == 0 {
            self.majflt += n.below(50);
        }
        self.s_cpu += 60 + n.below(60);
        self.s_bytes += 50 + n.below(100);
        let psi = |n: &mut Noise, max: u64| Some(n.below(max.max(1)) as f64 / 100.0);
        let (cpu_psi, io_psi) = if self.busy { (500, 100) } else { (0, 0) };
        let (cpu_avg10, io_avg10) = (psi(n, cpu_psi), psi(n, io_psi));
        // The totals climb by the stalled share of the 5 s interval (full about 85 % of
        // some, as in the captured 24.11 job: 4507191 of 5136553 µs).
        for (k, avg) in [cpu_avg10, io_avg10].into_iter().enumerate() {
            let some = (avg.unwrap_or(0.0) / 100.0 * 5e6) as u64;
            self.stall[2 * k] += some;
            self.stall[2 * k + 1] += some * 85 / 100;
        }
        SampleRow {
            t_unix_ms: T0 + (i * 5_000 + n.below(4)) as i64,
            series,
            kind: SampleKind::Periodic,
            usage: UsageReading {
                cpu_usage_usec: Some(self.cpu),
                cpu_user_usec: Some(self.user),
                cpu_system_usec: Some(self.sys),
                memory_usage_bytes: Some(usage),
                memory_cache_bytes: Some(cache),
                memory_working_set_bytes: Some(ws),
                memory_lifetime_peak_bytes: Some(self.peak),
                memory_limit_bytes: Some(32 << 30),
                memory_oom_kills: Some(0),
                memory_limit_hits: Some(0),
                memory_major_faults: Some(self.majflt),
                io_read_bytes: Some(self.io_r),
                io_write_bytes: Some(self.io_w),
                processes: Some(9),
                threads: Some(40),
                pressure: Pressure {
                    cpu_some_avg10: cpu_avg10,
                    memory_some_avg10: Some(0.0),
                    memory_full_avg10: Some(0.0),
                    io_some_avg10: io_avg10,
                    io_full_avg10: Some(0.0),
                    cpu_some_total_usec: Some(self.stall[0]),
                    cpu_full_total_usec: Some(self.stall[1]),
                    memory_some_total_usec: Some(0),
                    memory_full_total_usec: Some(0),
                    io_some_total_usec: Some(self.stall[2]),
                    io_full_total_usec: Some(self.stall[3]),
                },
            },
            cores_allocated: Some(8),
            memory_working_set_max_bytes: Some(ws + n.below(50) * (1 << 20) / page * page),
            effective_cores_max: Some((6000 + n.below(1500)) as f64 / 1000.0),
            sampler_cpu_usec: Some(self.s_cpu),
            sampler_bytes_written: Some(self.s_bytes),
        }
    }
}

fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Writes 7 days of a job series plus the batch step's series (a single-step batch job),
/// the way the plugin would, and reports the file size. `srun`: the batch script runs one
/// `srun` step for the whole week, so batch (idle, waiting) and step 0 are both stored.
fn seven_days(busy: bool, srun: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    w.begin_step("extern", T0 - 100, None).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    if srun {
        w.begin_step("0", T0 + 1, Some(8)).unwrap();
    }
    let mut job = Job::new(busy);
    let mut step = Job::new(busy && !srun);
    let mut step0 = Job::new(busy);
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let mut max_wal = 0;
    let wal = dir.path().join("job.db-wal");
    // A busy job also prints all week: a progress bar whose pace changes every 10 minutes,
    // its output's size noted as the recorder notes it (`recording::output`).
    let mut notes = OutputNotes::default();
    let mut log_bytes = 0u64;
    for i in 0..ROWS_7_DAYS {
        w.push(job.next(i, Series::Job));
        if busy {
            log_bytes += if (i / 120) % 2 == 0 { 4000 } else { 2500 };
            let seen = FileSeen {
                dev: 1,
                ino: 1,
                bytes: log_bytes,
            };
            for s in notes.at_row(T0 + i as i64 * 5_000, Some(seen), None) {
                w.push_output_size(s);
            }
        }
        // The plugin's policy (`recording::rows`): while several steps run, step rows are
        // kept every STEP_ROW_EVERY intervals (the job series has full resolution).
        let step_due = !srun || i.is_multiple_of(STEP_ROW_EVERY.into());
        let (b, s0) = (
            step.next(i, Series::step("batch")),
            step0.next(i, Series::step("0")),
        );
        if step_due {
            w.push(b);
        }
        if srun && step_due {
            w.push(s0);
        }
        if i % FLUSH_EVERY == FLUSH_EVERY - 1 {
            w.flush().unwrap();
            if i % 1200 == 1199 {
                max_wal = max_wal.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
            }
        }
    }
    for s in notes.finish() {
        w.push_output_size(s);
    }
    w.flush().unwrap();
    w.end_step("batch", T0 + ROWS_7_DAYS as i64 * 5_000, Some(0))
        .unwrap();
    w.close().unwrap();
    let (wall, cpu) = (wall.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let size = std::fs::metadata(&path).unwrap().len();
    if let Ok(keep) = std::env::var("STORE_BENCH_KEEP") {
        std::fs::copy(&path, format!("{keep}-{}{}.db", busy as u8, srun as u8)).unwrap();
    }
    let t = Instant::now();
    let r = Reader::open(&path).unwrap();
    let n_job = r.samples(&Series::Job).unwrap().len();
    let n_step = r.samples(&Series::step("batch")).unwrap().len();
    let n_sizes = r.output_sizes(1).unwrap().len();
    let read_ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "7-day file ({}{}): {size} bytes = {:.2} MB, {:.1} bytes per job row; \
         rows read back: job {n_job}, batch {n_step}, output sizes {n_sizes}; \
         writing: {:.1} µs CPU per job row incl. its step rows ({:.1} s CPU, {:.1} s wall); \
         WAL at most {} KiB; full read {read_ms:.0} ms",
        if busy { "busy job" } else { "quiet job" },
        if srun {
            ", batch + srun step 0"
        } else {
            ", single-step batch"
        },
        size as f64 / 1e6,
        size as f64 / ROWS_7_DAYS as f64,
        cpu * 1e6 / ROWS_7_DAYS as f64,
        cpu,
        wall,
        max_wal / 1024,
    );
    assert!(size < 10_000_000, "7-day file over the 10 MB budget");
}

fn push_flush(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    let mut job = Job::new(true);
    let mut i = 0;
    let mut g = c.benchmark_group("store");
    g.throughput(Throughput::Elements(FLUSH_EVERY));
    g.bench_function("push 12 rows + flush", |b| {
        b.iter(|| {
            for _ in 0..FLUSH_EVERY {
                w.push(job.next(i, Series::Job));
                i += 1;
            }
            w.flush().unwrap();
        })
    });
    g.finish();
}

fn main() {
    seven_days(true, false);
    seven_days(false, false);
    seven_days(true, true);
    seven_days(false, true);
    let mut c = Criterion::default().sample_size(20).configure_from_args();
    push_flush(&mut c);
    c.final_summary();
}
