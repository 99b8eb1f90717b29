//! Asks Slurm what [`super::analyse`] needs: four commands per refresh whatever the
//! cluster's size (`scontrol show job -o ID`, `scontrol show partition -o`,
//! `scontrol -d show node -o`, `squeue --start`), run at once so the answer takes as long
//! as the slowest, each bounded by the command timeout.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::history::{self, workload_name};
use crate::slurm::sacct::{self, Window};
use crate::slurm::scontrol::{self, JobDetails, ShowError};
use crate::slurm::squeue::{self, QueryError};

use super::history_hint::{History, HISTORY_WINDOW_DAYS};
use super::Inputs;

/// The Slurm commands one refresh runs.
pub const COMMANDS_PER_REFRESH: u32 = 4;

/// How a refresh went.
#[derive(Debug, Clone)]
pub struct Gathered {
    pub inputs: Inputs,
    pub commands: u32,
    pub elapsed: Duration,
    /// Partial answers (nodes or queue unreadable) are still analysed; these say what is
    /// missing.
    pub notes: Vec<String>,
}

/// Why there is no answer at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatherError {
    #[error(transparent)]
    Show(#[from] ShowError),
    #[error("Slurm no longer knows job {0}")]
    UnknownJob(u32),
}

/// Asks Slurm about the job and the cluster. `Ok` with a job that is no longer pending is
/// possible (it started meanwhile): the caller checks [`JobDetails::is_pending`].
pub fn gather(job_id: u32) -> Result<Gathered, GatherError> {
    let t = Instant::now();
    let (job, parts, nodes, queue) = std::thread::scope(|s| {
        let job = s.spawn(move || scontrol::show_job(job_id));
        let parts = s.spawn(scontrol::show_partitions);
        let nodes = s.spawn(scontrol::show_nodes);
        let queue = s.spawn(squeue::query_start);
        let failed = || ShowError::Failed("a query thread stopped".into());
        (
            job.join().unwrap_or_else(|_| Err(failed())),
            parts.join().unwrap_or_else(|_| Err(failed())),
            nodes.join().unwrap_or_else(|_| Err(failed())),
            queue
                .join()
                .unwrap_or_else(|_| Err(QueryError::Failed("a query thread stopped".into()))),
        )
    });
    let job = job?.ok_or(GatherError::UnknownJob(job_id))?;
    let mut notes = Vec::new();
    let partitions = parts.unwrap_or_else(|e| {
        notes.push(format!("partitions unreadable: {e}"));
        Vec::new()
    });
    let nodes = nodes.unwrap_or_else(|e| {
        notes.push(format!("nodes unreadable: {e}"));
        Vec::new()
    });
    let queue = queue.unwrap_or_else(|e| {
        notes.push(format!("queue unreadable: {e}"));
        Vec::new()
    });
    let groups = user_groups(&job);
    Ok(Gathered {
        inputs: Inputs {
            job,
            partitions,
            nodes,
            queue,
            groups,
            history: Default::default(),
        },
        commands: COMMANDS_PER_REFRESH,
        elapsed: t.elapsed(),
        notes,
    })
}

/// The sacct calls one history lookup makes: one user's own jobs over the window are few,
/// so the window is asked in one call (the all-users `history` command asks a week at a
/// time).
pub const HISTORY_SACCT_CALLS: u32 = 1;

/// The whole history lookup's time limit: the pending view asks it once and waits for it
/// beside the first refresh, so it must stay short.
pub const HISTORY_TIMEOUT: Duration = Duration::from_secs(10);

/// The user's finished runs of the job's workload over the last [`HISTORY_WINDOW_DAYS`],
/// with their recorded files (from `dirs`) where there are any. One bounded sacct window
/// query; a failure is [`History::Unavailable`], never an error of the pending view.
pub fn history(user: &str, job_name: &str, dirs: &[PathBuf], now_unix: i64) -> History {
    let q = sacct::Query {
        timeout: HISTORY_TIMEOUT,
        ..sacct::Query::default()
    };
    history_with(&q, user, job_name, dirs, now_unix)
}

/// [`history`] with a given sacct (tests use a fake).
pub fn history_with(
    q: &sacct::Query,
    user: &str,
    job_name: &str,
    dirs: &[PathBuf],
    now_unix: i64,
) -> History {
    let w = Window {
        since_unix: now_unix - i64::from(HISTORY_WINDOW_DAYS) * 86400,
        until_unix: now_unix,
        users: vec![user.to_string()],
        all_users: false,
        partition: None,
    };
    let q = sacct::Query {
        program: q.program.clone(),
        timeout: q.timeout,
        chunk_seconds: w.until_unix - w.since_unix,
    };
    match q.window(&w) {
        Ok(batch) => {
            let workload = workload_name(job_name);
            let (mut runs, _unfinished) = history::runs_from(&batch.records);
            // Only this workload's files are opened.
            runs.retain(|r| workload_name(&r.name) == workload);
            history::attach_recordings(&mut runs, dirs);
            History::Runs(runs)
        }
        // The report's wording names its own options; here only the cause matters.
        Err(e) => History::Unavailable(match e {
            sacct::SacctError::Missing(_) => "sacct is not installed here".into(),
            sacct::SacctError::TimedOut(s) => format!("sacct did not answer within {s} s"),
            e => e.to_string(),
        }),
    }
}

/// The job user's group names (primary and supplementary), from the system's group
/// database: Slurm matches `AllowGroups` by name.
fn user_groups(job: &JobDetails) -> Vec<String> {
    let mut names = vec![job.group.clone()];
    let (Ok(user), Some(gid)) = (std::ffi::CString::new(job.user.as_str()), job.gid) else {
        return names;
    };
    let mut n: libc::c_int = 64;
    let mut gids: Vec<libc::gid_t> = vec![0; n as usize];
    // SAFETY: getgrouplist writes at most `n` gids into the buffer we own and updates `n`;
    // retried once with the size it asks for.
    let ok = unsafe {
        let mut r = libc::getgrouplist(user.as_ptr(), gid, gids.as_mut_ptr(), &mut n);
        if r < 0 && n > 0 && n < 65536 {
            gids.resize(n as usize, 0);
            r = libc::getgrouplist(user.as_ptr(), gid, gids.as_mut_ptr(), &mut n);
        }
        r >= 0
    };
    if !ok {
        return names;
    }
    gids.truncate(n.max(0) as usize);
    for g in gids {
        if let Some(name) = group_name(g) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

fn group_name(gid: libc::gid_t) -> Option<String> {
    // SAFETY: getgrgid_r with a buffer we own; the result points into it.
    unsafe {
        let mut gr: libc::group = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16384];
        let mut out: *mut libc::group = std::ptr::null_mut();
        if libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) == 0
            && !out.is_null()
            && !gr.gr_name.is_null()
        {
            return std::ffi::CStr::from_ptr(gr.gr_name)
                .to_str()
                .ok()
                .map(str::to_string);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_in_its_own_group() {
        let j = JobDetails {
            user: "root".into(),
            group: "root".into(),
            gid: Some(0),
            ..JobDetails::default()
        };
        assert!(user_groups(&j).contains(&"root".to_string()));
        let nobody = JobDetails {
            user: "no-such-user-x".into(),
            group: "g".into(),
            gid: Some(4242),
            ..JobDetails::default()
        };
        assert_eq!(user_groups(&nobody)[0], "g");
    }

    /// A fake sacct that logs its arguments and prints `text`, or fails.
    fn fake_sacct(d: &std::path::Path, text: &str, ok: bool) -> sacct::Query {
        use std::os::unix::fs::PermissionsExt;
        let answer = d.join("out.txt");
        std::fs::write(&answer, text).unwrap();
        let p = d.join("sacct");
        let body = if ok {
            crate::history::fixture::replay(&answer, sacct::DELIMITER)
        } else {
            "echo 'sacct: error: Problem talking to the database' >&2; exit 1".into()
        };
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"$*\" >> {}/args.log\n{body}\n",
                d.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        sacct::Query {
            program: p,
            timeout: Duration::from_secs(10),
            ..sacct::Query::default()
        }
    }

    fn sacct_text() -> String {
        let u = "\u{1f}";
        let mut s = [
            "JobID", "JobIDRaw", "JobName", "User", "State", "ExitCode", "Start", "End",
        ]
        .join(u);
        s.push('\n');
        for (id, name) in [
            (1, "train-1"),
            (2, "train-2"),
            (3, "eval-1"),
            (4, "train-7"),
        ] {
            let row = [
                id.to_string(),
                id.to_string(),
                name.to_string(),
                "alice".into(),
                "COMPLETED".into(),
                "0:0".into(),
                format!("2026-11-02T0{id}:00:00"),
                format!("2026-11-02T0{id}:30:00"),
            ];
            s += &row.join(u);
            s.push('\n');
        }
        s
    }

    #[test]
    fn history_is_one_bounded_window_query_of_the_user_filtered_to_the_workload() {
        let d = tempfile::tempdir().unwrap();
        let q = fake_sacct(d.path(), &sacct_text(), true);
        let now = 1_800_000_000;
        let History::Runs(runs) = history_with(&q, "alice", "train-11", &[], now) else {
            panic!("runs expected");
        };
        // Every chunk printed the same jobs: kept once each, other workloads dropped.
        let mut names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["train-1", "train-2", "train-7"]);
        let log = std::fs::read_to_string(d.path().join("args.log")).unwrap();
        assert_eq!(log.lines().count() as u32, HISTORY_SACCT_CALLS);
        assert!(log.lines().all(|l| l.contains("-u alice")), "{log}");

        let d = tempfile::tempdir().unwrap();
        let q = fake_sacct(d.path(), "", false);
        match history_with(&q, "alice", "train-11", &[], now) {
            History::Unavailable(why) => assert!(why.contains("database"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
