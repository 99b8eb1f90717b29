//! What the live view pays on a running 7-day job at 5 s (busy batch job with a week-long
//! `srun` step, the largest case of benches/store.rs): the first snapshot (`--once --json`:
//! open, read the job series, build the snapshot) and each refresh after the sampler stored
//! a row, by following the series (`Reader::follow`) against decoding it whole again
//! (`Reader::samples`, what every refresh did before). Prints medians of `LIVE_RUNS` (9).
//!
//! `cargo run --release -p slurmwatch-core --example live_cost`

use std::time::Instant;

use slurmwatch_core::analysis::ledger::NodeFigures;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::snapshot::{self, JobFacts, SnapshotSource};
use slurmwatch_core::store::{JobMeta, Reader, Writer};

#[path = "support/week.rs"]
mod week;
use week::*;

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One refresh's snapshot from `rows` (what the screen and `--once --json` show).
fn snap(reader: &Reader, meta: &JobMeta, rows: &[SampleRow]) {
    let s = snapshot::from_rows(
        SnapshotSource::PluginFile,
        Some(meta),
        &JobFacts::default(),
        rows,
        true,
    );
    let _gpus = snapshot::gpus_from_reader(reader, meta.interval_seconds);
    assert!(s.memory.peak_working_set_bytes.value.is_some());
}

fn main() {
    let runs = runs_from_env("LIVE_RUNS");
    let spool = tempfile::tempdir().unwrap();
    let path = spool.path().join(format!("{JOB_ID}.sqlite"));
    write_week(&path, false);
    // The sampler goes on writing: one job row per refresh.
    let mut w = Writer::open_existing(&path).unwrap();
    let mut t_next = T0 + ROWS_7_DAYS as i64 * 5_000;
    let mut store_one = |w: &mut Writer| {
        let mut r = SampleRow::empty(t_next, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = Some(1);
        r.usage.memory_working_set_bytes = Some(1 << 30);
        w.push(r);
        w.flush().unwrap();
        t_next += 5_000;
    };

    let first: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let reader = Reader::open(&path).unwrap();
            let meta = reader.meta().unwrap();
            let mut f = reader.following(&Series::Job);
            let rows = reader.follow(&mut f).unwrap();
            snap(&reader, &meta, rows);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();

    let reader = Reader::open(&path).unwrap();
    let meta = reader.meta().unwrap();
    let whole: Vec<f64> = (0..runs)
        .map(|_| {
            store_one(&mut w);
            let t = Instant::now();
            let rows = reader.samples(&Series::Job).unwrap();
            snap(&reader, &meta, &rows);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let mut f = reader.following(&Series::Job);
    reader.follow(&mut f).unwrap();
    let followed: Vec<f64> = (0..runs)
        .map(|_| {
            store_one(&mut w);
            let t = Instant::now();
            let rows = reader.follow(&mut f).unwrap();
            snap(&reader, &meta, rows);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    // The ledger so far (`--once --json`'s `ledger`, the dashboard's block): the summary's
    // figures over every row (and every card reading; this job has no card).
    let ledger: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let l = NodeFigures::read(&reader, &meta, f.rows()).unwrap();
            assert!(l.summary.cpu_usage_seconds_total.is_some());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let n = f.rows().len();
    assert_eq!(n, reader.samples(&Series::Job).unwrap().len());
    println!("a running 7-day job ({n} job rows), medians of {runs}:");
    println!(
        "  first snapshot (--once --json's file work): {:.1} ms",
        median_ms(first)
    );
    println!(
        "  refresh after a new row, series decoded whole: {:.1} ms",
        median_ms(whole)
    );
    println!(
        "  refresh after a new row, series followed: {:.2} ms",
        median_ms(followed)
    );
    println!(
        "  the ledger so far (computed again at most once per 20 times this): {:.1} ms",
        median_ms(ledger)
    );
}
