//! The CLI reads job ids through `slurm::job_id` only: the forms it refuses stay refused, and
//! an array task's file is never taken to be the one named by its array's id.

use std::process::Command;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../core/tests/fixtures/store/v1.sqlite"
);

/// A spool holding the fixture as job 12345's live file.
fn spool() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(FIXTURE, d.path().join("12345.sqlite")).unwrap();
    d
}

fn report(job: &str, spool: &std::path::Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
        .args(["report", job, "--no-sacct", "--no-log", "--json", "--spool"])
        .arg(spool)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_job_is_found_in_the_spool_by_its_own_id() {
    let d = spool();
    let (code, out, err) = report("12345", d.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"job_id\""), "{out}");
}

#[test]
fn an_array_task_without_sacct_is_not_given_its_arrays_file() {
    // 12345 is the array's id, which is another task's own: without sacct's JobIDRaw the
    // task's file is unknown, and the array's is not shown as the task's.
    let d = spool();
    let (code, out, err) = report("12345_7", d.path());
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("only sacct tells"), "{err}");
}

#[test]
fn ids_that_are_not_one_job_are_refused_with_the_forms() {
    let d = spool();
    for bad in [
        "012345",
        "4294967296",
        "12345678901",
        "12345+1",
        "12345.batch",
        "12345_[1-3]",
        "١٢٣",
    ] {
        let (code, _, err) = report(bad, d.path());
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(
            err.contains("is not a job id") && err.contains("12345_7"),
            "{bad}: {err}"
        );
    }
}
