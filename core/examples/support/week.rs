//! A busy 7-day job file at 5 s (a batch job beside a week-long `srun` step; deterministic
//! noise), the largest case of benches/store.rs, for the examples that time what a long job
//! costs. Shared by `#[path]`: each example is its own crate.

use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::{Pressure, Source, UsageReading};
use slurmwatch_core::store::{JobMeta, Writer};

pub const T0: i64 = 1_700_000_000_000;
pub const ROWS_7_DAYS: u64 = 7 * 24 * 3600 / 5;
pub const JOB_ID: u32 = 4242;

/// Deterministic noise (xorshift), so runs compare.
struct Noise(u64);
impl Noise {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A busy job's counters (~6 of 8 cores, a 20 GiB working set moving by ±100 MiB, 10 MB/s
/// read): the harsh case of benches/store.rs.
#[derive(Default)]
struct Job {
    cpu: u64,
    io: u64,
    s_cpu: u64,
}

impl Job {
    fn next(&mut self, n: &mut Noise, i: u64, series: Series) -> SampleRow {
        let d = 3_000_000 * (90 + n.below(21)) / 100;
        self.cpu += d;
        self.io += 50_000_000 * (50 + n.below(101)) / 100;
        self.s_cpu += 60 + n.below(60);
        let page = 4096;
        let ws = ((20u64 << 30) + n.below(201) * (1 << 20)) / page * page;
        let cache = ((5u64 << 30) + n.below(21) * (1 << 20)) / page * page;
        let mut r = SampleRow::empty(
            T0 + (i * 5_000 + n.below(4)) as i64,
            series,
            SampleKind::Periodic,
        );
        r.usage = UsageReading {
            cpu_usage_usec: Some(self.cpu),
            cpu_user_usec: Some(self.cpu * 9 / 10),
            cpu_system_usec: Some(self.cpu - self.cpu * 9 / 10),
            memory_usage_bytes: Some(ws + cache),
            memory_cache_bytes: Some(cache),
            memory_working_set_bytes: Some(ws),
            memory_lifetime_peak_bytes: Some(26 << 30),
            memory_limit_bytes: Some(32 << 30),
            memory_oom_kills: Some(0),
            memory_limit_hits: Some(0),
            memory_major_faults: Some(i / 20),
            io_read_bytes: Some(self.io),
            io_write_bytes: Some(self.io / 10),
            processes: Some(9),
            threads: Some(40),
            pressure: Pressure {
                cpu_some_avg10: Some(n.below(500) as f64 / 100.0),
                memory_some_avg10: Some(0.0),
                memory_full_avg10: Some(0.0),
                io_some_avg10: Some(n.below(100) as f64 / 100.0),
                io_full_avg10: Some(0.0),
                ..Pressure::default()
            },
        };
        r.cores_allocated = Some(8);
        r.memory_working_set_max_bytes = Some(ws + n.below(50) * (1 << 20));
        r.effective_cores_max = Some((6000 + n.below(1500)) as f64 / 1000.0);
        r.sampler_cpu_usec = Some(self.s_cpu);
        r.sampler_bytes_written = Some(i * 90);
        r
    }
}

/// The file at `path`; `ended`: both steps end at the week's last row.
pub fn write_week(path: &std::path::Path, ended: bool) {
    let meta = JobMeta {
        job_id: JOB_ID.into(),
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
    };
    let mut w = Writer::create(path, &meta).unwrap();
    w.begin_step("extern", T0 - 100, None).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    w.begin_step("0", T0 + 1, Some(8)).unwrap();
    let mut n = Noise(0x9E37_79B9_7F4A_7C15);
    let (mut job, mut batch, mut step0) = (Job::default(), Job::default(), Job::default());
    for i in 0..ROWS_7_DAYS {
        let row = job.next(&mut n, i, Series::Job);
        w.push(row);
        if i % 6 == 0 {
            let b = batch.next(&mut n, i, Series::step("batch"));
            w.push(b);
            let s = step0.next(&mut n, i, Series::step("0"));
            w.push(s);
        }
        if i % 12 == 11 {
            w.flush().unwrap();
        }
    }
    if ended {
        let end = T0 + ROWS_7_DAYS as i64 * 5_000;
        w.end_step("0", end, Some(0)).unwrap();
        w.end_step("batch", end, Some(0)).unwrap();
    } // else still running: no step end, no summary
    w.close().unwrap();
}

/// How many timed runs an example takes: the variable `var`, else 9.
pub fn runs_from_env(var: &str) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9)
}
