//! `slurmwatch-dbd-comment --cluster NAME JOB`: stores the AdminComment read from stdin as job
//! `JOB`'s (`ID` or `ARRAYID_TASK`) in slurmdbd, through `slurmdb_job_modify` — what `sacctmgr
//! modify job … set AdminComment=` does, without sacctmgr's lowercasing of the value (22.05.8;
//! base64, jobstats' format, does not survive it). Run by `slurmwatch ctld-epilog` as
//! SlurmUser; checking whose comment is there first is the caller's job.
//!
//! Exit: 0 stored; 1 slurmdbd has no such job yet (the caller tries again); 2 bad usage or no
//! answer from slurmdbd.
//!
//! `JOB` is read by slurmwatch's one job-id parser (`slurm::job_id`), compiled in from core's
//! own file: that file needs nothing but `std`, while linking core (SQLite, NVML, …) for one
//! function would make this libslurm client as heavy as the CLI.

#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
mod ffi {
    include!(concat!(env!("OUT_DIR"), "/slurmdb.rs"));
}
// The one parser, not a copy: core's file itself.
#[path = "../../recorder/src/slurm/job_id.rs"]
mod job_id;

use std::ffi::CString;
use std::io::Read;
use std::process::ExitCode;

/// The most read from stdin (slurmdbd keeps AdminComment in a 64 KiB `TEXT` column).
const MAX_COMMENT_BYTES: u64 = 64 * 1024;

fn usage(why: &str) -> ExitCode {
    eprintln!("slurmwatch-dbd-comment: {why}\nhint: slurmwatch-dbd-comment --cluster NAME JOBID < comment");
    ExitCode::from(2)
}

/// `ID` or `ARRAYID_TASK` into (job id, array task id or `NO_VAL`); Slurm's `NO_VAL` and
/// above mean "none" to slurmdbd, so they are no ids here.
fn job_of(s: &str) -> Option<(u32, u32)> {
    use job_id::JobId;
    match JobId::job_or_task(s)? {
        JobId::Job(j) if j < ffi::NO_VAL => Some((j, ffi::NO_VAL)),
        JobId::ArrayTask { array, task } if array < ffi::NO_VAL && task < ffi::NO_VAL => {
            Some((array, task))
        }
        _ => None,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cluster, job) = match args.as_slice() {
        [flag, c, j] if flag == "--cluster" => (c.clone(), j.clone()),
        _ => return usage("expected --cluster NAME and one job id."),
    };
    let Some((job_id, task_id)) = job_of(&job) else {
        return usage(&format!("{job:?} is not a job id."));
    };
    let mut comment = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(MAX_COMMENT_BYTES + 1)
        .read_to_end(&mut comment)
    {
        return usage(&format!("cannot read the comment from stdin: {e}."));
    }
    while comment.last().is_some_and(|b| b.is_ascii_whitespace()) {
        comment.pop();
    }
    if comment.is_empty() || comment.len() as u64 > MAX_COMMENT_BYTES {
        return usage("the comment on stdin is empty or larger than 64 KiB.");
    }
    let (Ok(comment), Ok(cluster)) = (CString::new(comment), CString::new(cluster)) else {
        return usage("the comment or the cluster name holds a NUL byte.");
    };
    // SAFETY: Slurm's documented client sequence; every pointer handed to Slurm stays alive
    // until the call that uses it returns, and the lists are given no destructor (their items
    // are owned here).
    unsafe {
        ffi::slurm_init(std::ptr::null());
        let mut db = ffi::slurmdb_connection_get(std::ptr::null_mut());
        if db.is_null() {
            eprintln!("slurmwatch-dbd-comment: no connection to slurmdbd.");
            return ExitCode::from(2);
        }
        let mut step: ffi::slurm_selected_step_t = std::mem::zeroed();
        step.array_task_id = task_id;
        step.het_job_offset = ffi::NO_VAL;
        step.step_id.job_id = job_id;
        step.step_id.step_id = ffi::NO_VAL;
        step.step_id.step_het_comp = ffi::NO_VAL;
        let mut cond: ffi::slurmdb_job_cond_t = std::mem::zeroed();
        cond.flags = ffi::sw_flag_SW_NO_DEFAULT_USAGE;
        // What sacctmgr sends: without it slurmdbd matches no job.
        cond.db_flags = ffi::sw_flag_SW_JOB_FLAG_NOTSET;
        cond.step_list = ffi::slurm_list_create(None);
        ffi::slurm_list_append(cond.step_list, (&raw mut step).cast());
        cond.cluster_list = ffi::slurm_list_create(None);
        ffi::slurm_list_append(cond.cluster_list, cluster.as_ptr() as *mut _);
        let mut new_values: ffi::slurmdb_job_rec_t = std::mem::zeroed();
        // Unset numbers are NO_VAL: a zero would be stored as the derived exit code.
        new_values.derived_ec = ffi::NO_VAL;
        new_values.admin_comment = comment.as_ptr() as *mut _;
        let changed = ffi::slurmdb_job_modify(db, &raw mut cond, &raw mut new_values);
        let n = if changed.is_null() {
            0
        } else {
            ffi::slurm_list_count(changed)
        };
        let code = if n > 0 && ffi::slurmdb_connection_commit(db, true) == 0 {
            0
        } else {
            1
        };
        ffi::slurm_list_destroy(cond.step_list);
        ffi::slurm_list_destroy(cond.cluster_list);
        ffi::slurmdb_connection_close(&raw mut db);
        if code == 0 {
            println!(
                "stored the AdminComment of job {job} ({} bytes)",
                comment.as_bytes().len()
            );
        } else {
            eprintln!("slurmwatch-dbd-comment: slurmdbd modified no job {job} on cluster {:?} (not recorded yet?)", cluster);
        }
        ExitCode::from(code)
    }
}

#[cfg(test)]
mod job_of_tests {
    use super::*;

    #[test]
    fn a_job_or_an_array_task_and_nothing_else() {
        assert_eq!(job_of("12345"), Some((12345, ffi::NO_VAL)));
        assert_eq!(job_of("12345_7"), Some((12345, 7)));
        assert_eq!(job_of("12345_0"), Some((12345, 0)));
        for no in [
            "0",
            "012345",
            "+12345",
            "12345+1",
            "12345.batch",
            "12345_[1-3]",
            "12345_07",
            "4294967294",
            "4294967295",
            "4294967296",
            "1_4294967294",
            " 1",
            "",
        ] {
            assert_eq!(job_of(no), None, "{no}");
        }
    }
}
