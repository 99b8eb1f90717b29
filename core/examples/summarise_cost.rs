//! Wall time of the epilog's whole job (`summarise_job_file`: open, decode, summarise, write
//! the summary) on a 7-day file at 5 s, the largest case of benches/store.rs (busy batch job
//! with a week-long `srun` step). Prints the median, min and max wall time and the median
//! CPU time (the figure to compare on a busy machine) of `SUMMARISE_RUNS` runs (default 9).
//!
//! `cargo run --release -p slurmwatch-core --example summarise_cost`

use std::time::Instant;

use slurmwatch_core::analysis::summary::summarise_job_file;

#[path = "support/week.rs"]
mod week;
use week::*;

fn cpu_ms() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(ru.ru_utime) + ms(ru.ru_stime)
}

fn main() {
    let runs = runs_from_env("SUMMARISE_RUNS");
    let spool = tempfile::tempdir().unwrap();
    let path = spool.path().join(format!("{JOB_ID}.sqlite"));
    write_week(&path, true);
    let size = std::fs::metadata(&path).unwrap().len();
    let (mut ms, mut cpu): (Vec<f64>, Vec<f64>) = (0..runs)
        .map(|_| {
            let (t, c) = (Instant::now(), cpu_ms());
            summarise_job_file(spool.path(), JOB_ID).unwrap();
            (t.elapsed().as_secs_f64() * 1e3, cpu_ms() - c)
        })
        .unzip();
    ms.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    println!(
        "summarise_job_file on a 7-day file ({:.2} MB, busy batch + srun step): wall median {:.0} ms (min {:.0}, max {:.0}), CPU median {:.0} ms, over {runs} runs",
        size as f64 / 1e6,
        ms[runs / 2],
        ms[0],
        ms[runs - 1],
        cpu[runs / 2],
    );
}
