//! Wall time of one `slurmwatch metrics` scrape (`export::live::gather` + the Prometheus
//! rendering) of a spool holding one running job 7 days in, at 5 s (busy batch job with a
//! week-long `srun` step, the largest case of benches/store.rs): what each file of a
//! long-running job costs every scrape. Prints the median, min and max of `SCRAPE_RUNS`
//! runs (default 9).
//!
//! `cargo run --release -p slurmwatch-core --example scrape_cost`

use std::time::{Duration, Instant};

use slurmwatch_core::export::live::{gather, FileState, GatherOptions};
use slurmwatch_core::export::prometheus::{render, RenderOptions};

#[path = "support/week.rs"]
mod week;
use week::*;

fn main() {
    let runs = runs_from_env("SCRAPE_RUNS");
    let spool = tempfile::tempdir().unwrap();
    let path = spool.path().join(format!("{JOB_ID}.sqlite"));
    write_week(&path, false);
    let size = std::fs::metadata(&path).unwrap().len();
    // The exporter's own bounds; "now" just after the last row.
    let opts = GatherOptions {
        now_unix_ms: T0 + ROWS_7_DAYS as i64 * 5_000,
        max_age: Duration::from_secs(u64::MAX / 4),
        ..GatherOptions::standard(3600)
    };
    let mut ms: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let s = gather(spool.path(), &opts);
            assert_eq!(s.files[0].state, FileState::Live, "{:?}", s.files);
            let text = render(&s, &RenderOptions::default());
            assert!(text.contains("slurmwatch_cpu_seconds_total"));
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    println!(
        "one scrape of a running 7-day job ({:.2} MB, busy batch + srun step): median {:.0} ms (min {:.0}, max {:.0}) over {runs} runs",
        size as f64 / 1e6,
        ms[runs / 2],
        ms[0],
        ms[runs - 1],
    );
}
