//! What the incarnation key costs a step's sampler: the /proc kind (the job's oldest
//! slurmstepd, found by reading every process's command line on the node) against the cgroup
//! kind (one `stat` of the job's directory), on this machine's live /proc.
//!
//! `cargo run --release -p slurmwatch-core --example incarnation_cost [CGROUP_DIR]`; start
//! e.g. 1000 `sleep` processes first to see how the scan grows with a node's processes.

use std::time::Instant;

fn main() {
    let proc_root = std::path::Path::new("/proc");
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/sys/fs/cgroup".into());
    let processes = std::fs::read_dir(proc_root)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
                .count()
        })
        .unwrap_or(0);
    let per = |n: u32, f: &dyn Fn()| {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    };
    let scan = per(100, &|| {
        std::hint::black_box(slurmwatch_core::collect::job_incarnation(
            proc_root,
            u32::MAX,
        ));
    });
    let stat = per(1000, &|| {
        std::hint::black_box(std::fs::symlink_metadata(&dir).ok());
    });
    println!(
        "{processes} processes: /proc scan {scan:.0} µs ({:.1} µs a process), cgroup stat {stat:.1} µs",
        scan / processes.max(1) as f64
    );
}
