//! Time of the epilog (summary of a 7-day file, written back into it) and of the report
//! (load + build + text + SVG) on a generated 7-day, 5-s file (120,960 job rows).
//!
//! `cargo bench -p slurmwatch-core --bench report` prints the medians of 5 runs.

use std::time::Instant;

use slurmwatch_core::analysis::summary;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::report::{self, chart, text, NodeRecording};
use slurmwatch_core::sample::{Source, UsageReading};
use slurmwatch_core::store::{self, JobMeta, Reader, Writer};

const T0: i64 = 1_700_000_000_000;
const ROWS: i64 = 7 * 24 * 3600 / 5;

fn meta() -> JobMeta {
    JobMeta {
        job_id: 4242,
        user: "alice".into(),
        uid: 1000,
        node: "node1".into(),
        cluster: None,
        plugin_version: "0.1.0".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: Some(8),
        memory_allocated_bytes: Some(32 << 30),
        started_unix_ms: T0,
        incarnation: None,
    }
}

/// The 7-day batch job's file; with `steps` > 0 the batch script also runs that many `srun`
/// steps one after another, evenly over the week (each recording its own series while the
/// batch step runs beside it), as a pipeline job does.
pub fn generate(path: &std::path::Path, steps: i64) {
    let mut w = Writer::create(path, &meta()).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    let rows_per_step = if steps > 0 { ROWS / steps } else { 0 };
    let mut step_cpu = 0u64;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut cpu = 0u64;
    let mut peak = 0u64;
    for i in 0..ROWS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        cpu += 5_000_000 * (4 + x % 3);
        let ws = (20u64 << 30) + (x % 200) * (1 << 20);
        let cache = (5u64 << 30) + (x % 20) * (1 << 20);
        peak = peak.max(ws + cache);
        let kind = if i == 0 {
            SampleKind::Start
        } else if i == ROWS - 1 {
            SampleKind::End
        } else {
            SampleKind::Periodic
        };
        let mut r = SampleRow::empty(T0 + i * 5000, Series::Job, kind);
        r.usage = UsageReading {
            cpu_usage_usec: Some(cpu),
            cpu_user_usec: Some(cpu / 10 * 9),
            cpu_system_usec: Some(cpu / 10),
            memory_usage_bytes: Some(ws + cache),
            memory_cache_bytes: Some(cache),
            memory_working_set_bytes: Some(ws),
            memory_lifetime_peak_bytes: Some(peak),
            memory_limit_bytes: Some(32 << 30),
            memory_oom_kills: Some(0),
            memory_limit_hits: Some(0),
            memory_major_faults: Some(i as u64 / 100),
            processes: Some(9),
            threads: Some(40),
            ..UsageReading::default()
        };
        r.cores_allocated = Some(8);
        r.memory_working_set_max_bytes = Some(ws + (x % 50) * (1 << 20));
        r.effective_cores_max = Some(6.0 + (x % 1500) as f64 / 1000.0);
        r.sampler_cpu_usec = Some(i as u64 * 90);
        r.sampler_bytes_written = Some(i as u64 * 100);
        w.push(r.clone());
        if steps > 0 && i < steps * rows_per_step {
            // Step k runs over rows [k·n, (k+1)·n − 1): a start, periodic rows, an end.
            let (k, j) = (i / rows_per_step, i % rows_per_step);
            let name = k.to_string();
            let t = T0 + i * 5000 + 1;
            if j == 0 {
                w.begin_step(&name, t, Some(1)).unwrap();
            }
            let kind = match j {
                0 => SampleKind::Start,
                j if j == rows_per_step - 1 => SampleKind::End,
                _ => SampleKind::Periodic,
            };
            step_cpu += 4_000_000;
            let mut sr = SampleRow::empty(t, Series::Step(name.clone()), kind);
            sr.usage = UsageReading {
                cpu_usage_usec: Some(step_cpu),
                memory_working_set_bytes: Some((2u64 << 30) + (x % 100) * (1 << 20)),
                ..r.usage.clone()
            };
            w.push(sr);
            if j == rows_per_step - 1 {
                w.end_step(&name, t, Some(0)).unwrap();
            }
        }
        if i % 720 == 0 {
            w.flush().unwrap();
        }
    }
    w.end_step("batch", T0 + (ROWS - 1) * 5000, Some(0))
        .unwrap();
    w.close().unwrap();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing useful: keep it quick.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("4242.sqlite");
    let t = Instant::now();
    generate(&path, 0);
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "7-day file: {ROWS} job rows, {:.1} MB, generated in {:.1} s",
        size as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    let mut epilog = Vec::new();
    let mut report_ms = Vec::new();
    let mut report_stored_ms = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let reader = Reader::open(&path).unwrap();
        let s = summary::from_reader(&reader).unwrap();
        drop(reader);
        store::summary::write(&path, &s.to_pairs()).unwrap();
        epilog.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    for stored in [true, false] {
        if !stored {
            // Without the epilog's summary the report computes it itself.
            let c = rusqlite::Connection::open(&path).unwrap();
            c.execute_batch("DROP TABLE summary").unwrap();
        }
        for _ in 0..5 {
            let t = Instant::now();
            let rec = NodeRecording::load(&path).unwrap();
            assert_eq!(rec.summary_stored, stored);
            let rep = report::build("4242", std::slice::from_ref(&rec), None, None, None);
            let out = text::render(&rep, false);
            let svg = chart::svg(&rep);
            let json = rep.to_json();
            assert!(!out.is_empty() && !svg.is_empty() && !json.is_empty());
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            if stored {
                report_stored_ms.push(ms)
            } else {
                report_ms.push(ms)
            }
        }
    }
    println!(
        "epilog (read + summarise + write summary): median {:.0} ms",
        median(epilog)
    );
    println!(
        "report (load + build + text + SVG + JSON), with the epilog's summary: median {:.0} ms",
        median(report_stored_ms)
    );
    println!(
        "report without a summary (computed on the fly): median {:.0} ms",
        median(report_ms)
    );
    // A pipeline: the same week with STEPS `srun` steps one after another beside the batch
    // step. Each step's rows are its own series plus, where it ran alone, the job series'.
    let many = dir.path().join("4243.sqlite");
    generate(&many, STEPS);
    // The epilog's whole job on it, under its own deadline, as slurmwatch-epilog runs it.
    let mut many_epilog_ms = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let outcome = summary::summarise_job_file(dir.path(), 4243);
        many_epilog_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(outcome.is_ok(), "{outcome:?}");
    }
    println!(
        "epilog of the same week with {STEPS} srun steps beside the batch step: median {:.0} ms",
        median(many_epilog_ms)
    );
    let c = rusqlite::Connection::open(&many).unwrap();
    c.execute_batch("DROP TABLE summary").unwrap();
    drop(c);
    let mut many_ms = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let rec = NodeRecording::load(&many).unwrap();
        assert_eq!(rec.step_figures.len() as i64, STEPS + 1);
        let rep = report::build("4243", std::slice::from_ref(&rec), None, None, None);
        assert!(!text::render(&rep, false).is_empty() && !chart::svg(&rep).is_empty());
        many_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "report of it without the epilog's summary (computed on the fly): median {:.0} ms",
        median(many_ms)
    );
}

const STEPS: i64 = 200;
