//! `slurmwatch ctld-epilog`: run from `EpilogSlurmctld` on the slurmctld host, stores the
//! finished job's summary (collected from its nodes) as its AdminComment in slurmdbd. The
//! work is in `slurmwatch_core::export::slurmdbd`; this reads Slurm's environment and says
//! what it did in one line on stderr (the shipped wrapper, `slurmctld-epilog.sh`, passes it
//! to syslog).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use slurmwatch_core::export::slurmdbd::{self, NodeAnswer, Stored};
use slurmwatch_core::slurm::hostlist;

#[derive(Args)]
#[command(
    after_help = "Slurm sets SLURM_JOB_ID and SLURM_JOB_NODELIST in EpilogSlurmctld's environment; \
each node must serve `slurmwatch metrics --listen` (the URL below), whose replies are
accepted only with root's munge credential over them (unmunge must run here). See docs/admin.md.

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
    /// The program that stores the AdminComment through slurmdbd's API, keeping its case
    /// (default: slurmwatch-dbd-comment next to this program). Without it, sacctmgr stores
    /// it, and Slurm 22.05's sacctmgr lowercases it, which jobstats' base64 does not survive.
    #[arg(long, value_name = "PATH")]
    pub dbd_comment: Option<std::path::PathBuf>,
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
    let answers = slurmdbd::collect(&args.url, &nodes, job_id, &slurmdbd::Verifier::default());
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
    let job = slurmdbd::job_ref(
        job_id,
        std::env::var("SLURM_ARRAY_JOB_ID").ok().as_deref(),
        std::env::var("SLURM_ARRAY_TASK_ID").ok().as_deref(),
    );
    let elapsed = slurmdbd::elapsed(
        "scontrol",
        &job_id.to_string(),
        deadline
            .saturating_duration_since(Instant::now())
            .min(Duration::from_secs(10)),
    );
    let helper = args.dbd_comment.or_else(|| {
        let p = std::env::current_exe()
            .ok()?
            .with_file_name("slurmwatch-dbd-comment");
        p.is_file().then_some(p)
    });
    let helper = helper.as_ref().map(|p| p.to_string_lossy().into_owned());
    let cluster = std::env::var("SLURM_CLUSTER_NAME").ok();
    let dbd_comment = match (&helper, &cluster) {
        (Some(h), Some(c)) if !c.is_empty() => Some((h.as_str(), c.as_str())),
        _ => {
            eprintln!(
                "slurmwatch ctld-epilog: job {job}: storing through sacctmgr (no slurmwatch-dbd-comment{}), in the older SW1: format that survives 22.05's lowercasing: jobstats' readers will not read it",
                if cluster.is_none() { " or no SLURM_CLUSTER_NAME" } else { "" }
            );
            None
        }
    };
    let comment = match slurmdbd::comment_for(job_id, &answers, elapsed, dbd_comment.is_some()) {
        None => return Ok(0), // not recorded anywhere (or no node answered: said above)
        Some(Err(e)) => bail!("job {job_id}: {e}"),
        Some(Ok(c)) => c,
    };
    if args.dry_run {
        println!("{comment}");
        return Ok(0);
    }
    let recorded = answers
        .iter()
        .filter(|(_, a)| matches!(a, NodeAnswer::Recorded(_)))
        .count();
    let programs = slurmdbd::Programs {
        dbd_comment,
        ..slurmdbd::Programs::default()
    };
    match slurmdbd::store(&job, &comment, programs, deadline) {
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
