//! `slurmwatch-epilog`: summarise a finished job's file into its `summary` table.
//!
//! Runs as root, either as (part of) Slurm's `Epilog=` program, or from the plugin's
//! `job_epilog` callback. Contract (docs/design.md §2.8, §7): always exits 0 (a failing epilog
//! drains the node), never calls a Slurm command, never follows a user-controlled path — the
//! only path it opens is `<spool>/<job id>.sqlite` in the root-owned spool, built from a job id
//! that must be all digits, opened with `O_NOFOLLOW` and refused unless a regular file.
//! Problems go to stderr as one line (slurmd logs an epilog's stderr) and nothing else.
//!
//! ```text
//! slurmwatch-epilog [--spool DIR] [--quiet] [JOBID]
//! ```
//! The job id defaults to `SLURM_JOB_ID` (set in the epilog's environment by slurmd); the
//! spool to the site's (`spool=` on the plugstack line slurmstepd reads: `slurmwatch_recorder::site`).

use std::path::PathBuf;
use std::time::Instant;

use slurmwatch_recorder::analysis::summary;
use slurmwatch_recorder::slurm::job_id::JobId;

/// The epilog returns within [`summary::EPILOG_BOUND`] whatever the file holds (statement
/// deadlines inside the summariser) or the filesystem does: the work runs on a thread, and
/// the process exits 0 when the bound passes (exiting ends the thread).
fn main() {
    // Whatever happens — a panic or a hang included — the exit status is 0.
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::Builder::new().spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(run));
    });
    let outcome = match worker {
        Ok(_) => rx.recv_timeout(summary::EPILOG_BOUND).ok(),
        Err(_) => Some(std::panic::catch_unwind(run)),
    };
    match outcome {
        Some(Ok(Ok(Some(msg)))) => eprintln!("slurmwatch-epilog: {msg}"),
        Some(Ok(Ok(None))) => {}
        Some(Ok(Err(e))) => eprintln!("slurmwatch-epilog: {e}"),
        Some(Err(_)) => eprintln!("slurmwatch-epilog: internal error (panic); nothing written"),
        None => eprintln!(
            "slurmwatch-epilog: gave up after {} s (the file or its filesystem did not answer); nothing written",
            summary::EPILOG_BOUND.as_secs()
        ),
    }
    std::process::exit(0);
}

/// `Ok(Some(msg))` for a note worth logging, `Err` for a failure; both exit 0.
fn run() -> Result<Option<String>, String> {
    let mut spool: Option<PathBuf> = None;
    let mut job: Option<String> = None;
    let mut quiet = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--spool" => {
                spool = Some(PathBuf::from(
                    args.next().ok_or("--spool needs a directory")?,
                ))
            }
            "--quiet" => quiet = true,
            "-h" | "--help" => {
                println!("usage: slurmwatch-epilog [--spool DIR] [--quiet] [JOBID]  (JOBID defaults to $SLURM_JOB_ID, DIR to plugstack.conf's spool=; %n in DIR is $SLURMD_NODENAME)");
                return Ok(None);
            }
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s => job = Some(s.to_string()),
        }
    }
    let job = job
        .or_else(|| std::env::var("SLURM_JOB_ID").ok())
        .ok_or("no job id (give one, or run from Slurm's epilog where SLURM_JOB_ID is set)")?;
    // Strict (`slurm::job_id`): the id becomes a file name inside the spool.
    let job_id = JobId::own(&job).ok_or_else(|| format!("{job:?} is not a job id"))?;
    // The site's spool, as slurmstepd's plugstack line names it (`slurmwatch_recorder::site`).
    let mut spool = spool.unwrap_or_else(|| {
        slurmwatch_recorder::site::Site::here()
            .spool_template()
            .to_path_buf()
    });
    // `spool=…/%n` (several slurmd on one host): slurmd gives its epilog its node name.
    if spool.to_str().is_some_and(|s| s.contains('%')) {
        let node = std::env::var("SLURMD_NODENAME")
            .map_err(|_| "the spool has %n but SLURMD_NODENAME is not set".to_string())?;
        spool = slurmwatch_recorder::options::spool_for_node(&spool, &node)
            .ok_or_else(|| format!("{node:?} is not a node name"))?;
    }
    let t0 = Instant::now();
    match summary::summarise_job_file(&spool, job_id).map_err(|e| e.to_string())? {
        // Not recorded (the user did not ask): nothing to do, nothing to say.
        summary::EpilogOutcome::NotRecorded => Ok(None),
        summary::EpilogOutcome::Written => Ok((!quiet).then(|| {
            format!(
                "job {job}: summary written to {} in {} ms",
                spool
                    .join(slurmwatch_recorder::store::paths::live_name(job_id))
                    .display(),
                t0.elapsed().as_millis()
            )
        })),
    }
}
