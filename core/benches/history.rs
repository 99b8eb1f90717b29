//! History analysis of the generated 10,000-job sacct answer (`history::fixture`, job line +
//! `.batch` step each): parse, build runs, group, size and find patterns — everything after sacct returns.
//! Target: under 1 s.

use criterion::{criterion_group, criterion_main, Criterion};
use slurmwatch_core::history;
use slurmwatch_core::history::fixture;
use slurmwatch_core::slurm::sacct;

fn bench(c: &mut Criterion) {
    let text = fixture::ten_thousand();
    let mut g = c.benchmark_group("history");
    g.sample_size(10);
    g.bench_function("analyse_10000_jobs", |b| {
        b.iter(|| {
            let batch = sacct::parse_many(&text, sacct::DELIMITER);
            let (runs, _) = history::runs_from(&batch.records);
            history::analyse(runs)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
