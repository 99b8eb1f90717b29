//! A cgroup that disappears between two readings (Slurm removes the step directory at step
//! end; an admin may kill a job mid-sample): the next reading is all "unreadable", never a
//! panic and never zeros.

use slurmwatch_core::collect::{V1Reader, V2Reader};
use std::path::Path;

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/collect")
}

#[test]
fn v1_step_vanishing_between_readings_reads_as_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixtures().join("v1"), dir.path());
    let step = Path::new("/slurm_node1/uid_1000/job_42/step_batch");
    let mut reader = V1Reader::new(dir.path(), step, step, None, None);
    let before = reader.read();
    assert!(before.cpu_usage_usec.is_some() && before.memory_usage_bytes.is_some());
    for ctrl in ["memory", "cpuacct"] {
        std::fs::remove_dir_all(dir.path().join(ctrl).join(step.strip_prefix("/").unwrap()))
            .unwrap();
    }
    let after = reader.read();
    assert_eq!(
        after,
        slurmwatch_core::sample::UsageReading::default(),
        "{after:?}"
    );
}

#[test]
fn v2_job_vanishing_between_readings_reads_as_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixtures().join("v2"), dir.path());
    let job = Path::new("/system.slice/slurmstepd.scope/job_42");
    let mut reader = V2Reader::new(dir.path(), job);
    let before = reader.read();
    assert!(before.cpu_usage_usec.is_some() && before.memory_working_set_bytes.is_some());
    std::fs::remove_dir_all(dir.path().join(job.strip_prefix("/").unwrap())).unwrap();
    let after = reader.read();
    assert_eq!(
        after,
        slurmwatch_core::sample::UsageReading::default(),
        "{after:?}"
    );
}
