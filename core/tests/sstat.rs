//! sstat parsing, from output captured on the test cluster (Slurm 22.05.8,
//! jobacct_gather/cgroup, JobAcctGatherFrequency=task=1).

use std::path::PathBuf;

use slurmwatch_core::slurm::sstat::{parse, FIELDS};

const KIB: u64 = 1 << 10;

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/slurm")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Job 389: `-n2 --mem=1G`; the batch script burnt 4 s, wrote 20 MiB with dd and held
/// 80 MiB in python while `srun -n2 --overlap` ran two tasks that each touched 150 MiB and
/// burnt 3 s. At the capture the job's cgroup said: step_batch 3.84 CPU-s, step_0 3.39 CPU-s,
/// step_extern 0.001 CPU-s; usage 437 MB of which 21 MB page cache.
#[test]
fn running_steps_of_a_real_job() {
    let text = fixture("sstat_running_steps.txt");
    assert!(
        text.starts_with(&FIELDS.replace(',', "|")),
        "fields as asked"
    );
    let s = parse(&text);
    let ids: Vec<&str> = s.steps.iter().map(|s| s.step_id.as_str()).collect();
    assert_eq!(ids, ["389.extern", "389.batch", "389.0"]);
    let batch = &s.steps[1];
    // `00:00:03`: whole seconds, truncated (the cgroup had 3.84).
    assert_eq!(batch.ave_cpu_seconds, Some(3.0));
    assert_eq!(batch.ntasks, Some(1));
    assert_eq!(batch.max_rss_bytes, Some(88_760 * KIB));
    assert_eq!(batch.max_rss_node.as_deref(), Some("vm"));
    // Bare numbers are bytes; dd wrote 20 MiB.
    assert_eq!(batch.max_disk_write_bytes, Some(20_971_615));
    assert_eq!(batch.max_disk_read_bytes, Some(20_987_423));
    let step0 = &s.steps[2];
    assert_eq!(step0.ntasks, Some(2));
    assert_eq!(step0.max_rss_bytes, Some(156_392 * KIB));
    assert_eq!(step0.ave_rss_bytes, Some(156_390 * KIB));
    // `1.00M` on the extern step: a suffix with decimals.
    assert_eq!(s.steps[0].max_disk_write_bytes, Some(1 << 20));
    // AveCPU 1 s × 2 tasks loses the fractions; TRESUsageInTot's cpu= is the step's sum.
    assert_eq!(step0.ave_cpu_seconds, Some(1.0));
    assert_eq!(step0.tres_cpu_seconds, Some(3.0));
    assert_eq!(step0.cpu_seconds(), Some(3.0));
    assert_eq!(step0.tres_mem_bytes, Some(312_780 * KIB));
    // Over the job: 0 + 3 + 3 s of the cgroup's 7.24 s (whole seconds, per step).
    let total = s.cpu_seconds_total().unwrap();
    assert_eq!(total, 6.0);
    assert!((7.24 - 3.0..=7.24).contains(&total));
    // The largest one task: a step-0 task's 150 MiB, not the batch script's 87 MiB.
    assert_eq!(s.max_rss_bytes(), Some(156_392 * KIB));
    assert_eq!(s.max_rss_node().as_deref(), Some("vm"));
}

/// `sstat -j 999999`: the header alone on stdout (and, on stderr, "couldn't get steps for
/// job 999999" with exit status 0).
#[test]
fn no_steps_is_an_empty_summary() {
    let s = parse(&fixture("sstat_unknown_job.txt"));
    assert!(s.steps.is_empty());
    assert_eq!(s.cpu_seconds_total(), None);
    assert_eq!(s.max_rss_bytes(), None);
}
