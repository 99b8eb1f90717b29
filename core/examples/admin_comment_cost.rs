//! What reading the jobs' summaries from slurmdbd costs `history` and `sizing`: each job's
//! `SW1:` AdminComment decoded in full (`analysis::admin_comment::decode`, the report's path) and
//! as the history path reads it (`history::RunRecording::from_admin_comment`, the figures only).
//! The comments are real ones, captured from the test cluster's slurmdbd, in both formats:
//! jobstats' `JS1:` (core/tests/fixtures/slurm/admin_comments_js1_real.txt, what is stored
//! now) and the older `SW1:` (admin_comments_real.txt), each cycled over `ADMIN_JOBS` jobs
//! (default 100,000). Both paths must give the same figures for every comment, or it stops.
//!
//! `cargo run --release -p slurmwatch-core --example admin_comment_cost`

use std::time::Instant;

use slurmwatch_core::analysis::admin_comment::decode;
use slurmwatch_core::history::RunRecording;

/// The history's figures from a full decode (what `from_admin_comment` read before it
/// decoded the figures alone): largest peaks, summed CPU seconds and kills.
fn figures_of_full(c: &str) -> (Option<u64>, Option<f64>, Option<u64>, usize, usize) {
    let rec = decode(c).unwrap();
    let s: Vec<_> = rec.nodes.iter().map(|n| &n.summary).collect();
    (
        s.iter().filter_map(|s| s.peak_working_set_bytes).max(),
        s.iter()
            .filter_map(|s| s.cpu_usage_seconds_total)
            .reduce(|a, b| a + b),
        s.iter().filter_map(|s| s.oom_kills).reduce(|a, b| a + b),
        s.iter().map(|s| s.gpus.len()).max().unwrap_or(0),
        s.iter()
            .map(|s| {
                s.gpus
                    .iter()
                    .filter(|g| g.mean_utilization_percent.is_some_and(|u| u >= 5.0))
                    .count()
            })
            .max()
            .unwrap_or(0),
    )
}

fn main() {
    let jobs: usize = std::env::var("ADMIN_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    for (format, file) in [
        (
            "JS1:",
            include_str!("../tests/fixtures/slurm/admin_comments_js1_real.txt"),
        ),
        (
            "SW1:",
            include_str!("../tests/fixtures/slurm/admin_comments_real.txt"),
        ),
    ] {
        cost(format, file, jobs);
    }
}

/// Both decodes over `jobs` comments cycled from `file`'s lines.
fn cost(format: &str, file: &str, jobs: usize) {
    let real: Vec<String> = file.lines().map(str::to_string).collect();
    for c in &real {
        let r = RunRecording::from_admin_comment(c).expect("a real comment decodes");
        let full = figures_of_full(c);
        assert_eq!(
            (
                r.peak_working_set_bytes,
                r.cpu_seconds,
                r.oom_kills,
                r.gpus_seen,
                r.gpus_used
            ),
            full,
            "the two paths disagree on {c}"
        );
    }
    let comments: Vec<&str> = (0..jobs).map(|j| real[j % real.len()].as_str()).collect();
    let bytes: usize = comments.iter().map(|c| c.len()).sum();

    let t = Instant::now();
    let mut n = 0usize;
    for c in &comments {
        n += figures_of_full(c).3 + 1;
    }
    let full_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut m = 0usize;
    for c in &comments {
        m += RunRecording::from_admin_comment(c).unwrap().gpus_seen + 1;
    }
    let lean_s = t.elapsed().as_secs_f64();
    assert_eq!(n, m);
    println!(
        "{jobs} real {format} AdminComments ({:.0} bytes each, {} distinct): full decode {:.2} s ({:.1} µs a job); history's figures-only decode {:.2} s ({:.1} µs a job)",
        bytes as f64 / jobs as f64,
        real.len(),
        full_s,
        full_s * 1e6 / jobs as f64,
        lean_s,
        lean_s * 1e6 / jobs as f64
    );
}
