//! Sampler cost per stored sample against fixture trees: the cgroup read (job and step
//! series, as the plugin does every tick) plus the SQLite insert, amortised over a flush.
//! Target: at most 100 µs of CPU per stored sample on the 2-core dev machine.
//!
//! Schema 3 added PSI's six stall totals to every row (issue 39's ledger): the two cgroup v2
//! "stored sample" benches run side by side, the same read and insert with the totals kept
//! and with them dropped before the insert (what schema 2 stored). The read parses them in
//! both (three `total=` fields of files it already reads), so that part of the cost is in
//! both and measured by `v2 read job+step` against its figure before schema 3 (docs).

use criterion::{criterion_group, criterion_main, Criterion};
use slurmwatch_core::collect::{V1Reader, V2Reader};
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::{JobMeta, Writer};
use std::hint::black_box;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../recorder/tests/fixtures/collect")
}

fn meta() -> JobMeta {
    JobMeta {
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
        incarnation: Some("boot:1".into()),
    }
}

fn sampler(c: &mut Criterion) {
    let root = fixtures().join("v1");
    let job = Path::new("/slurm_node1/uid_1000/job_42");
    let step = job.join("step_batch");
    let mut v1_job = V1Reader::new(&root, job, job, None, None);
    let mut v1_step = V1Reader::new(&root, &step, &step, None, None);
    c.bench_function("v1 read job+step", |b| {
        b.iter(|| black_box((v1_job.read(), v1_step.read())))
    });
    let v2_root = fixtures().join("v2");
    let v2_job = Path::new("/system.slice/slurmstepd.scope/job_42");
    let mut v2_j = V2Reader::new(&v2_root, v2_job);
    let mut v2_s = V2Reader::new(&v2_root, &v2_job.join("step_0"));
    c.bench_function("v2 read job+step", |b| {
        b.iter(|| black_box((v2_j.read(), v2_s.read())))
    });

    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::create(&dir.path().join("bench.sqlite"), &meta()).unwrap();
    w.begin_step("batch", 1_700_000_000_000, Some(1)).unwrap();
    let mut t = 1_700_000_000_000i64;
    // One stored sample = the job row (the single-step batch row is not stored twice), read
    // from the fixture tree, committed in batches as the plugin does (every 5 s at most).
    c.bench_function("stored sample: v1 read + insert (flush every 12)", |b| {
        let mut n = 0u32;
        b.iter(|| {
            t += 5000;
            let mut row = SampleRow::empty(t, Series::Job, SampleKind::Periodic);
            row.usage = v1_job.read();
            w.push(row);
            n += 1;
            if n.is_multiple_of(12) {
                w.flush().unwrap();
            }
        })
    });
    let mut w2 = Writer::create(&dir.path().join("bench-v2.sqlite"), &meta()).unwrap();
    w2.begin_step("batch", 1_700_000_000_000, Some(1)).unwrap();
    for keep_totals in [true, false] {
        let name = if keep_totals {
            "stored sample: v2 read + insert with stall totals (flush every 12)"
        } else {
            "stored sample: v2 read + insert, stall totals dropped (flush every 12)"
        };
        let mut t = 1_700_000_000_000i64;
        c.bench_function(name, |b| {
            let mut n = 0u32;
            b.iter(|| {
                t += 5000;
                let mut row = SampleRow::empty(t, Series::Job, SampleKind::Periodic);
                row.usage = v2_j.read();
                if !keep_totals {
                    let p = &mut row.usage.pressure;
                    *p = slurmwatch_core::sample::Pressure {
                        cpu_some_avg10: p.cpu_some_avg10,
                        memory_some_avg10: p.memory_some_avg10,
                        memory_full_avg10: p.memory_full_avg10,
                        io_some_avg10: p.io_some_avg10,
                        io_full_avg10: p.io_full_avg10,
                        ..Default::default()
                    };
                }
                w2.push(row);
                n += 1;
                if n.is_multiple_of(12) {
                    w2.flush().unwrap();
                }
            })
        });
    }
}

criterion_group!(benches, sampler);
criterion_main!(benches);
