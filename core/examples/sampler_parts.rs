//! Where the sampler's CPU goes inside a real job, part by part, on the sampler's own code:
//! run as a job's task by `scripts/bench-sampler.sh`, it locates its own job's cgroup as the
//! plugin does (`JobCollector::new`) and, waiting the way the sampler waits (`SCHED_BATCH`,
//! an mpsc `recv_timeout` of 1 s), does the default 5-s cycle: a stored row (the job's full
//! reading, the row's insert and its commit into a file in `DIR`) every fifth wake-up and a
//! fast read (`read_job_fast`) at the four between. Each part is timed on the thread's own
//! CPU clock (`CLOCK_THREAD_CPUTIME_ID`, ns) from a cold start after a second's sleep — what
//! the plugin pays, not a hot loop's figure — and the wake-up is the CPU from the end of one
//! cycle's work to the start of the next's.
//! `sampler_parts SECONDS DIR` prints medians in µs; with `SAMPLER_PARTS_UNBOUNDED=1` every
//! fast read reads the file cache (as before the working-set bound), for the comparison.

use slurmwatch_core::collect::JobCollector;
use slurmwatch_core::history::stats::median;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::{JobMeta, Writer};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// This thread's CPU so far, ns.
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn usage() -> ! {
    eprintln!("usage: sampler_parts SECONDS DIR (inside a Slurm job; DIR takes a scratch file)");
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: usize = match args.next().map(|s| s.parse()) {
        Some(Ok(n)) if n >= 10 => n,
        _ => usage(),
    };
    let dir = args.next().unwrap_or_else(|| usage());
    let job_id: u32 = std::env::var("SLURM_JOB_ID")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| usage());
    let unbounded = std::env::var_os("SAMPLER_PARTS_UNBOUNDED").is_some();
    let parts = std::thread::spawn(move || {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: a valid pointer; pid 0 is the calling thread.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
        let mut c = JobCollector::new(
            Path::new("/sys/fs/cgroup"),
            Path::new("/proc"),
            std::process::id(),
            job_id,
        );
        let meta = JobMeta {
            job_id: job_id.into(),
            user: "bench".into(),
            uid: 0,
            node: "bench".into(),
            cluster: None,
            plugin_version: "bench".into(),
            interval_seconds: 5,
            source: c.source(),
            cores_allocated: None,
            memory_allocated_bytes: None,
            started_unix_ms: 1_700_000_000_000,
            incarnation: None,
        };
        if meta.source == Source::Proc {
            eprintln!("sampler_parts: no cgroup found for this job (the /proc fallback)");
            std::process::exit(1);
        }
        let file = Path::new(&dir).join(format!("parts-{job_id}-{}.sqlite", std::process::id()));
        let mut w = Writer::create(&file, &meta).expect("the scratch file");
        w.begin_step("batch", meta.started_unix_ms, Some(1))
            .expect("step");
        let (_tx, rx) = mpsc::channel::<()>();
        let (mut wake, mut fast, mut read, mut store) = (vec![], vec![], vec![], vec![]);
        let us = |a: u64, b: u64| (b - a) as f64 / 1000.0;
        // The largest working set since the last row, as the plugin's `BetweenRows` keeps it.
        let mut seen: Option<u64> = None;
        let mut end = thread_cpu_ns();
        for i in 1..=seconds {
            let _ = rx.recv_timeout(Duration::from_secs(1));
            let t0 = thread_cpu_ns();
            if i % 5 == 0 {
                let r = c.read_job();
                let t1 = thread_cpu_ns();
                let mut row = SampleRow::empty(
                    meta.started_unix_ms + i as i64 * 1000,
                    Series::Job,
                    SampleKind::Periodic,
                );
                row.usage = r;
                w.push(row);
                w.flush().expect("flush");
                seen = None;
                let t2 = thread_cpu_ns();
                read.push(us(t0, t1));
                store.push(us(t1, t2));
            } else {
                let r = c.read_job_fast(seen.filter(|_| !unbounded));
                seen = seen.max(r.memory_working_set_bytes);
                fast.push(us(t0, thread_cpu_ns()));
            }
            // The first cycles warm the process up (page faults in new code, the file's creation).
            if i > 5 {
                wake.push(us(end, t0));
            }
            end = thread_cpu_ns();
        }
        let _ = std::fs::remove_file(&file);
        [wake, fast, read, store].map(|v| median(&v))
    })
    .join()
    .expect("the sampling thread");
    // Every part had readings (SECONDS >= 10); a part without one is an error, not a figure.
    let [Some(wake), Some(fast), Some(read), Some(store)] = parts else {
        eprintln!("sampler_parts: a part has no reading (n/a): {parts:?}");
        std::process::exit(1);
    };
    println!(
        "wake-up {wake:.0} µs, fast read {fast:.1} µs, row: reading {read:.0} µs + insert and commit {store:.0} µs; \
         a 5-s row = 5 wake-ups + 4 fast reads + reading + commit = {:.0} µs",
        5.0 * wake + 4.0 * fast + read + store
    );
}
