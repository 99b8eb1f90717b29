//! `slurmwatch ctld-epilog`: run from `EpilogSlurmctld` on the slurmctld host, stores the
//! finished job's summary (collected from its nodes) as its AdminComment in slurmdbd. The
//! work is in `slurmwatch_core::export::slurmdbd`; this reads Slurm's environment and says
//! what it did in one line on stderr (the shipped wrapper, `slurmctld-epilog.sh`, passes it
//! to syslog).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use slurmwatch_core::export::slurmdbd::{self, NodeAnswer, Stored};
use slurmwatch_core::report::slurmdbd::Incarnation;
use slurmwatch_core::slurm::{command, hostlist, sacct};

#[derive(Args)]
#[command(
    after_help = "Slurm sets SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_JOB_UID and SLURM_JOB_START_TIME in \
EpilogSlurmctld's environment; each node must serve `slurmwatch metrics --listen` (the URL
below). Requests carry this user's munge credential (run as SlurmUser or root: munge must
run here) and replies are accepted only with root's munge credential over them. A node that
does not answer is asked again every 2 s within the time given. See docs/admin.md.

Examples:
  slurmwatch ctld-epilog                                   # from EpilogSlurmctld
  slurmwatch ctld-epilog --job 4242 --nodes 'gpu[01-04]' --dry-run"
)]
pub struct CtldEpilogArgs {
    /// The job (default: $SLURM_JOB_ID).
    #[arg(long)]
    pub job: Option<u32>,
    /// Its nodes, as a Slurm host list (default: $SLURM_JOB_NODELIST).
    #[arg(long)]
    pub nodes: Option<String>,
    /// The job's uid (default: $SLURM_JOB_UID): a node's file of another user's job with
    /// the same id is not this job's.
    #[arg(long)]
    pub uid: Option<u32>,
    /// When Slurm started the job, in Unix seconds (default: $SLURM_JOB_START_TIME, else
    /// squeue's): a node's file from before it is an earlier job's with the same id.
    #[arg(long)]
    pub start: Option<i64>,
    /// Where a node serves a job's summary; {node} and {job} are filled in.
    #[arg(long, default_value = slurmdbd::DEFAULT_URL)]
    pub url: String,
    /// The most seconds spent, collection and store together (slurmdbd may not have the
    /// job's record for the first seconds).
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Print the AdminComment instead of storing it.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: CtldEpilogArgs) -> Result<i32> {
    let deadline = Instant::now() + Duration::from_secs(args.timeout.max(1));
    let job_id = match args.job {
        Some(j) => j,
        None => match std::env::var("SLURM_JOB_ID").ok().and_then(|j| j.parse().ok()) {
            Some(j) => j,
            None => bail!("no job id.\nhint: give --job, or run from EpilogSlurmctld where SLURM_JOB_ID is set"),
        },
    };
    let list = match args
        .nodes
        .or_else(|| std::env::var("SLURM_JOB_NODELIST").ok())
    {
        Some(l) if !l.trim().is_empty() => l,
        // A job cancelled before it ran had no nodes: nothing was recorded.
        _ => return Ok(0),
    };
    let nodes = hostlist::expand(&list)
        .map_err(|e| anyhow::anyhow!("cannot read the node list {list:?}: {e}"))?;
    let Some(uid) = args.uid.or_else(|| env_number("SLURM_JOB_UID")) else {
        bail!("no uid for job {job_id}.\nhint: give --uid, or run from EpilogSlurmctld where SLURM_JOB_UID is set");
    };
    let Some(start_unix) = args
        .start
        .or_else(|| env_number("SLURM_JOB_START_TIME"))
        .or_else(|| start_from_squeue(job_id))
    else {
        bail!("no start time for job {job_id}.\nhint: give --start (Unix seconds), or run from EpilogSlurmctld while slurmctld holds the job");
    };
    let verifier = slurmdbd::Verifier::default();
    let query = slurmdbd::Query {
        template: &args.url,
        job_id,
        run: Incarnation { uid, start_unix },
        nodes: &nodes,
        verifier: &verifier,
    };
    // Asking nodes again leaves the store at least a third of the time (slurmdbd may not
    // have the job's record for the first seconds).
    let collect_until = Instant::now() + Duration::from_secs(args.timeout.max(1)) * 2 / 3;
    let answers = slurmdbd::collect(&query, collect_until);
    for (node, a) in &answers {
        match a {
            NodeAnswer::Failed(why) => {
                eprintln!("slurmwatch ctld-epilog: job {job_id}: node {node}: {why}")
            }
            NodeAnswer::Refused(why) => eprintln!(
                "slurmwatch ctld-epilog: job {job_id}: node {node}: summary refused, not stored: {why}"
            ),
            NodeAnswer::Recorded(_) | NodeAnswer::NotRecorded => {}
        }
    }
    let comment = match slurmdbd::comment_for(job_id, &answers) {
        None => return Ok(0), // not recorded anywhere (or no node answered: said above)
        Some(Err(e)) => bail!("job {job_id}: {e}"),
        Some(Ok(c)) => c,
    };
    if args.dry_run {
        println!("{comment}");
        return Ok(0);
    }
    let job = slurmdbd::job_ref(
        job_id,
        std::env::var("SLURM_ARRAY_JOB_ID").ok().as_deref(),
        std::env::var("SLURM_ARRAY_TASK_ID").ok().as_deref(),
    );
    let recorded = answers
        .iter()
        .filter(|(_, a)| matches!(a, NodeAnswer::Recorded(_)))
        .count();
    match slurmdbd::store(&job, &comment, slurmdbd::Programs::default(), deadline) {
        Ok(Stored::Written) => {
            eprintln!(
                "slurmwatch ctld-epilog: job {job}: summary of {recorded} of {} node(s) stored in AdminComment ({} bytes)",
                nodes.len(),
                comment.len()
            );
            Ok(0)
        }
        Ok(Stored::LeftOthers(c)) => {
            eprintln!(
                "slurmwatch ctld-epilog: job {job}: AdminComment already holds another tool's text ({}…); left as it was",
                c.chars().take(12).collect::<String>()
            );
            Ok(0)
        }
        Err(e) => bail!("{e}"),
    }
}

fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// The job's start time as slurmctld holds it (`squeue`, the pinned `standard` format).
fn start_from_squeue(job_id: u32) -> Option<i64> {
    let f = command::run(
        "squeue",
        &["-h", "-t", "all", "-j", &job_id.to_string(), "-o", "%S"],
        command::DEFAULT_TIMEOUT,
    )
    .ok()?;
    f.success
        .then(|| sacct::parse_time(f.stdout.trim()))
        .flatten()
}
