//! The sampler's own cost per stored row of a real recorded job, from the job's file: the
//! median step of `sampler_cpu_usec` (the sampler thread's CPU, `RUSAGE_THREAD`) and of
//! `sampler_bytes_written` (its `wchar`) between consecutive periodic rows of the job
//! series, which the plugin writes into every row. Used by `scripts/bench-sampler.sh`:
//! `cargo run --release -p slurmwatch-core --example sampler_rows -- FILE`.

use slurmwatch_core::history::stats::median;
use slurmwatch_core::model::{SampleKind, Series};
use slurmwatch_core::store::Reader;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: sampler_rows FILE");
        std::process::exit(2);
    };
    let r = Reader::open(std::path::Path::new(&path)).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let rows = r.samples(&Series::Job).expect("job series");
    // Periodic rows after the first two (the start's file creation is not a row's cost).
    let periodic: Vec<_> = rows
        .iter()
        .filter(|r| r.kind == SampleKind::Periodic)
        .skip(2)
        .collect();
    let step = |f: fn(&slurmwatch_core::model::SampleRow) -> Option<u64>| -> Vec<f64> {
        periodic
            .windows(2)
            .filter_map(|w| Some(f(w[1])?.checked_sub(f(w[0])?)? as f64))
            .collect()
    };
    let cpu = step(|r| r.sampler_cpu_usec);
    let bytes = step(|r| r.sampler_bytes_written);
    let interval_s = periodic
        .windows(2)
        .map(|w| (w[1].t_unix_ms - w[0].t_unix_ms) as f64 / 1000.0)
        .collect::<Vec<_>>();
    println!(
        "{} rows: every {:.1} s, sampler CPU per stored row median {:.0} µs (min {:.0}, max {:.0}), bytes written per row median {:.0}",
        cpu.len(),
        median(&interval_s).unwrap_or(f64::NAN),
        median(&cpu).unwrap_or(f64::NAN),
        cpu.iter().cloned().fold(f64::INFINITY, f64::min),
        cpu.iter().cloned().fold(0.0, f64::max),
        median(&bytes).unwrap_or(f64::NAN),
    );
}
