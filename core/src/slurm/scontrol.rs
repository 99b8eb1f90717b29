//! `scontrol listpids`: the job's processes on this node (it answers only on the node).

use super::command::{self, CommandError};

/// One line of `scontrol listpids`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPid {
    pub pid: u32,
    pub job_id: u64,
    /// `batch`, `extern`, `0`, ...
    pub step: String,
}

/// Parses `scontrol listpids` output: a header, then `PID JOBID STEPID LOCALID GLOBALID`.
/// Slurm lists `-1` for a step whose pid it does not know: those are skipped.
pub fn parse_listpids(text: &str) -> Vec<JobPid> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let pid: i64 = f.next()?.parse().ok()?; // `-1` fails the u32 conversion below
            let job_id = f.next()?.parse().ok()?;
            let step = f.next()?.to_string();
            let pid = u32::try_from(pid).ok().filter(|&p| p > 0)?;
            Some(JobPid { pid, job_id, step })
        })
        .collect()
}

/// A pid of the job on this node to locate its cgroup from, preferring a user step over
/// the extern step's idle `sleep`. `Ok(None)`: the job has no processes on this node.
pub fn task_pid(job_id: u64) -> Result<Option<u32>, CommandError> {
    let f = command::run(
        "scontrol",
        &["listpids", &job_id.to_string()],
        command::DEFAULT_TIMEOUT,
    )?;
    let pids = parse_listpids(&f.stdout);
    let pick = pids
        .iter()
        .find(|p| p.job_id == job_id && p.step != "extern")
        .or_else(|| pids.iter().find(|p| p.job_id == job_id));
    Ok(pick.map(|p| p.pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from the test cluster: `scontrol listpids 101` for a running batch job.
    #[test]
    fn captured_listpids() {
        let p = parse_listpids(include_str!(
            "../../tests/fixtures/slurm/scontrol_listpids.txt"
        ));
        assert_eq!(p.len(), 4, "{p:?}"); // the header and the `-1` line are skipped
        assert_eq!(
            p[0],
            JobPid {
                pid: 1605,
                job_id: 101,
                step: "extern".into()
            }
        );
        assert_eq!(p[1].step, "batch");
        assert!(parse_listpids("").is_empty());
        assert!(parse_listpids("There are no steps for job 104 on node (null).").is_empty());
    }
}
