//! CPU time (not wall time: the machine may be busy) per stored sample of the sampler's hot
//! path against the fixture trees: job + step cgroup reads and one stored row, committed every
//! 12 rows. `cargo run --release -p slurmwatch-core --example sampler_cost`.

use slurmwatch_core::collect::{V1Reader, V2Reader};
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::{JobMeta, Writer};
use std::path::Path;

fn cpu_usec() -> u64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

fn main() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recorder/tests/fixtures/collect");
    let job = Path::new("/slurm_node1/uid_1000/job_42");
    let step = job.join("step_batch");
    // SAMPLER_COST_V1_JOB=/slurm_<node>/uid_<u>/job_<id> measures a real running job's
    // cgroup under /sys/fs/cgroup instead of the fixture tree.
    let real = std::env::var("SAMPLER_COST_V1_JOB")
        .ok()
        .map(std::path::PathBuf::from);
    let (v1_root, job, step) = match &real {
        Some(j) => (
            Path::new("/sys/fs/cgroup").to_path_buf(),
            j.as_path(),
            j.join("step_batch"),
        ),
        None => (fixtures.join("v1"), job, step),
    };
    let mut v1_job = V1Reader::new(&v1_root, job, job, None, None);
    let mut v1_step = V1Reader::new(&v1_root, &step, &step, None, None);
    let v2 = Path::new("/system.slice/slurmstepd.scope/job_42");
    let mut v2_job = V2Reader::new(&fixtures.join("v2"), v2);
    let mut v2_step = V2Reader::new(&fixtures.join("v2"), &v2.join("step_0"));
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = JobMeta {
        job_id: 42,
        user: "alice".into(),
        uid: 1000,
        node: "node1".into(),
        cluster: None,
        plugin_version: "bench".into(),
        interval_seconds: 5,
        source: Source::CgroupV1,
        cores_allocated: Some(4),
        memory_allocated_bytes: Some(8 << 30),
        started_unix_ms: 1_700_000_000_000,
        incarnation: None,
    };
    let mut w = Writer::create(&dir.path().join("cost.sqlite"), &meta).expect("create");
    w.begin_step("batch", meta.started_unix_ms, Some(1))
        .expect("step");
    const N: u64 = 20_000;
    for (name, v1) in [("cgroup v1", true), ("cgroup v2", false)] {
        // One stored row: the job's full reading and its insert (a single-step job's step
        // row equals the job's and is neither read nor stored).
        let t0 = cpu_usec();
        for i in 0..N {
            let r = if v1 { v1_job.read() } else { v2_job.read() };
            let mut row = SampleRow::empty(
                meta.started_unix_ms + (i as i64 + 1) * 5000,
                Series::Job,
                SampleKind::Periodic,
            );
            row.usage = r;
            w.push(row);
            if (i + 1) % 12 == 0 {
                w.flush().expect("flush");
            }
        }
        w.flush().expect("flush");
        let stored = (cpu_usec() - t0) as f64 / N as f64;
        // The insert alone (a reading taken once).
        let r = if v1 { v1_job.read() } else { v2_job.read() };
        let t0 = cpu_usec();
        for i in 0..N {
            let mut row = SampleRow::empty(
                meta.started_unix_ms + (N as i64 + i as i64 + 1) * 5000,
                Series::Job,
                SampleKind::Periodic,
            );
            row.usage = r.clone();
            w.push(row);
            if (i + 1) % 12 == 0 {
                w.flush().expect("flush");
            }
        }
        w.flush().expect("flush");
        let insert = (cpu_usec() - t0) as f64 / N as f64;
        // One fast read (working set and CPU only), four of them per 5-s interval.
        let t0 = cpu_usec();
        for _ in 0..N {
            std::hint::black_box(if v1 {
                v1_job.read_fast(None)
            } else {
                v2_job.read_fast(None)
            });
        }
        let fast = (cpu_usec() - t0) as f64 / N as f64;
        // A step row when several steps run: one more full read.
        let t0 = cpu_usec();
        for _ in 0..N {
            std::hint::black_box(if v1 { v1_step.read() } else { v2_step.read() });
        }
        let step = (cpu_usec() - t0) as f64 / N as f64;
        println!(
            "{name}: stored row (full job read + insert) {stored:.1} µs CPU (insert alone {insert:.1}); fast read {fast:.1} µs; \
             per 5-s interval at 1-s reads {:.1} µs; a concurrent step's full read adds {step:.1} µs",
            stored + 4.0 * fast
        );
    }
}
