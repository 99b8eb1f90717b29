//! `slurmwatch ctld-backfill`: on the slurmctld host (as SlurmUser or root), stores the job
//! summaries that are missing over a window of finished jobs — a node's endpoint was down,
//! restarting or busy past the EpilogSlurmctld's bound — as jobstats' `ingest_jobstats` does for
//! its own. A job is asked for when sacct shows it ended, ran on nodes and has no AdminComment,
//! or ours naming nodes that gave no figures when it was stored (a partial summary, replaced
//! only by one missing fewer nodes); one that holds a whole summary of ours is done, one that
//! holds another tool's text is never touched.
//! Each job goes through the EpilogSlurmctld's own path (`ctld_epilog::summarise_and_store`:
//! the nodes asked with the controller's munge credential, replies accepted only with root's),
//! one job at a time, each within its own bound.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use slurmwatch_core::analysis::admin_comment::{self, Incarnation};
use slurmwatch_core::slurm::hostlist;
use slurmwatch_core::slurm::sacct::{self, JobAccounting, Kept, Window};

use crate::ctld_epilog::{self, Done, How, OneJob};

#[derive(Args)]
#[command(
    after_help = "Run on the slurmctld host as SlurmUser or root (munge must run here), after a
node's endpoint was down: `slurmwatch ctld-epilog` logs each job and node it could not ask.
Prints one line per job asked and a total; exit 0 when every job asked was settled (stored,
or recorded nowhere), 1 when some summary could still not be fetched or stored.

Examples:
  slurmwatch ctld-backfill --since now-1d
  slurmwatch ctld-backfill --since 2026-12-01 --until 2026-12-02 --dry-run"
)]
pub struct CtldBackfillArgs {
    /// Start of the window of finished jobs: 2026-11-01, 2026-11-01T08:00, now-1d, @UNIX.
    #[arg(short = 'S', long, value_name = "TIME", default_value = "now-1d")]
    pub since: String,
    /// End of the window (same forms).
    #[arg(short = 'E', long, value_name = "TIME", default_value = "now")]
    pub until: String,
    /// Only these jobs of the window (comma-separated ids, as the EpilogSlurmctld's log
    /// names them).
    #[arg(short = 'j', long, value_name = "JOBS", value_delimiter = ',')]
    pub jobs: Vec<String>,
    /// Where a node serves a job's summary (default: the site file's [summary] url).
    #[arg(long)]
    pub url: Option<String>,
    /// The most seconds one job may take, collection and store together (default: the
    /// site file's [summary] timeout_seconds, else 60).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Seconds the sacct query of the window may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub sacct_timeout: u64,
    /// Print what would be stored instead of storing it.
    #[arg(long)]
    pub dry_run: bool,
    /// The program that stores the AdminComment through slurmdbd's API (default:
    /// slurmwatch-dbd-comment next to this program).
    #[arg(long, value_name = "PATH")]
    pub dbd_comment: Option<std::path::PathBuf>,
}

/// A finished job of the window without any AdminComment, or with a partial one of ours.
struct Missing {
    job_id: u32,
    /// As sacct names it (`<array>_<task>` for an array task).
    job: String,
    nodes: Vec<String>,
    run: Incarnation,
    elapsed: Option<u64>,
    /// Nodes the stored partial summary lacks; `None` when nothing is stored.
    unanswered_before: Option<usize>,
}

/// `None`: no AdminComment; `Some(n)`: ours, partial, `n` nodes without figures. A whole
/// summary of ours, another tool's text or a damaged one of ours: not asked for.
fn stored_gap(comment: Option<&str>) -> Option<Option<usize>> {
    let c = comment.map(str::trim).filter(|c| !c.is_empty());
    let Some(c) = c else {
        return Some(None);
    };
    let summary = admin_comment::decode(c).ok()?;
    (!summary.unanswered_nodes.is_empty()).then_some(Some(summary.unanswered_nodes.len()))
}

/// The job of `r` when it ended, ran on nodes and has no AdminComment, or a partial one of
/// ours.
fn missing(r: &JobAccounting) -> Option<Missing> {
    let j = &r.job;
    if r.is_open() || j.end_unix.is_none() {
        return None;
    }
    let unanswered_before = stored_gap(j.admin_comment.as_deref())?;
    let job_id = r.raw_id()?;
    let list = j
        .node_list
        .as_deref()
        .filter(|l| !l.is_empty() && *l != "None assigned")?;
    let nodes = hostlist::expand(list).ok()?;
    let run = Incarnation {
        uid: j.uid?,
        start_unix: j.start_unix?,
    };
    // An array task is `<array>_<task>` in sacct's JobID; sacctmgr needs that form.
    let job = if j.job_id.contains('_') {
        j.job_id.clone()
    } else {
        job_id.to_string()
    };
    Some(Missing {
        job_id,
        job,
        nodes,
        run,
        elapsed: j.elapsed_seconds,
        unanswered_before,
    })
}

pub fn run(args: CtldBackfillArgs) -> Result<i32> {
    let (url, per_job) = crate::site::summary_endpoint(args.url, args.timeout)?;
    let now = slurmwatch_core::sys::now_unix_s();
    let (Some(since), Some(until)) = (
        crate::history::parse_when(&args.since, now),
        crate::history::parse_when(&args.until, now),
    ) else {
        bail!("cannot read --since {:?} or --until {:?}.\nhint: use 2026-11-01, 2026-11-01T08:00, now-1d or @UNIX", args.since, args.until);
    };
    let q = sacct::Query {
        timeout: Duration::from_secs(args.sacct_timeout.max(1)),
        ..sacct::Query::default()
    };
    let window = Window {
        since_unix: since,
        until_unix: until,
        users: Vec::new(),
        all_users: true,
        partition: None,
    };
    let mut jobs: Vec<Missing> = Vec::new();
    q.window_each(&window, Kept::Ids, &mut |r| {
        if let Some(m) = missing(r) {
            let asked = args.jobs.is_empty()
                || args
                    .jobs
                    .iter()
                    .any(|j| *j == m.job || *j == m.job_id.to_string());
            if asked && !jobs.iter().any(|j| j.job_id == m.job_id) {
                jobs.push(m);
            }
        }
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (mut stored, mut nowhere, mut failed) = (0, 0, 0);
    let store = ctld_epilog::comment_store(args.dbd_comment.clone(), "ctld-backfill");
    for m in &jobs {
        let how = How {
            url: &url,
            dbd_comment: store
                .dbd_comment
                .as_ref()
                .map(|(h, c)| (h.as_str(), c.as_str())),
            case_kept: store.case_kept,
            dry_run: args.dry_run,
            who: "ctld-backfill",
        };
        let one = OneJob {
            job_id: m.job_id,
            job: &m.job,
            nodes: &m.nodes,
            run: m.run,
            elapsed: m.elapsed,
            unanswered_before: m.unanswered_before,
        };
        match ctld_epilog::summarise_and_store(&one, &how, Instant::now() + per_job) {
            Ok(Done::Printed(c)) => println!("job {}: {c}", m.job),
            Ok(done) => {
                match done {
                    Done::Stored { .. } => stored += 1,
                    Done::NotRecorded => nowhere += 1,
                    Done::Unanswered(_) | Done::StillPartial(_) => failed += 1,
                    Done::LeftOthers(_) | Done::Printed(_) => {}
                }
                println!("job {}: {}", m.job, done.said());
            }
            Err(e) => {
                failed += 1;
                println!("job {}: not stored: {e}", m.job);
            }
        }
    }
    println!(
        "{} finished job(s) without a whole summary in the window: {stored} stored, {nowhere} recorded nowhere, {failed} still missing",
        jobs.len()
    );
    Ok(if failed > 0 { 1 } else { 0 })
}
