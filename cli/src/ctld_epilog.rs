//! `slurmwatch ctld-epilog`: run from `EpilogSlurmctld` on the slurmctld host, stores the
//! finished job's summary (collected from its nodes) as its AdminComment in slurmdbd. The
//! work is in `slurmwatch_core::export::admin_comment_store`; this reads Slurm's environment
//! and says what it did in one line on stderr (the shipped wrapper, `slurmctld-epilog.sh`,
//! passes it to syslog).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use slurmwatch_core::analysis::admin_comment::Incarnation;
use slurmwatch_core::export::admin_comment_store::{self, NodeAnswer, Stored};
use slurmwatch_core::slurm::{command, hostlist, job_id::JobId, sacct};

#[derive(Args)]
#[command(
    after_help = "Slurm sets SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_JOB_UID and SLURM_JOB_START_TIME in \
EpilogSlurmctld's environment; each node must serve `slurmwatch metrics --listen` (the URL
below). Requests carry this user's munge credential (run as SlurmUser or root: munge must
run here) and replies are accepted only with root's munge credential over them. A node that
is busy (HTTP 503) is asked again every 2 s within the time given. See docs/admin.md.

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
    /// When Slurm started the job, in Unix seconds (default: $SLURM_JOB_START_TIME): a
    /// node's file from before it is an earlier job's with the same id. Without --uid or
    /// --start and the environment, Slurm's record of the job (squeue, else sacct) gives them.
    #[arg(long)]
    pub start: Option<i64>,
    /// Where a node serves a job's summary; {node} and {job} are filled in (default: the
    /// site file's [summary] url, else http://{node}:9944/jobs/{job}/summary).
    #[arg(long)]
    pub url: Option<String>,
    /// The most seconds spent, collection and store together (slurmdbd may not have the
    /// job's record for the first seconds; default: the site file's [summary]
    /// timeout_seconds, else 60).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Print the AdminComment instead of storing it.
    #[arg(long)]
    pub dry_run: bool,
    /// The program that stores the AdminComment through slurmdbd's API, keeping its case
    /// (default: slurmwatch-dbd-comment next to this program). Without it, sacctmgr stores
    /// it: in jobstats' format from Slurm 24.11 on, which keeps the case, and in the older
    /// SW1: format before (22.05's sacctmgr lowercases the value, breaking base64).
    #[arg(long, value_name = "PATH")]
    pub dbd_comment: Option<std::path::PathBuf>,
}

/// The run of the job to ask the nodes for: its uid and start from the arguments, else
/// EpilogSlurmctld's environment, else Slurm's record of the job (asked only then: a run by
/// hand).
fn job_run(job_id: u32, uid: Option<u32>, start: Option<i64>) -> Result<Incarnation> {
    let mut asked = None;
    let mut slurms = |pick: fn(&(u32, i64)) -> i64| {
        asked
            .get_or_insert_with(|| run_from_slurm(job_id))
            .map(|r| pick(&r))
    };
    let uid = uid
        .or_else(|| env_number("SLURM_JOB_UID"))
        .or_else(|| slurms(|r| i64::from(r.0)).and_then(|u| u32::try_from(u).ok()));
    let start_unix = start
        .or_else(|| env_number("SLURM_JOB_START_TIME"))
        .or_else(|| slurms(|r| r.1));
    let (Some(uid), Some(start_unix)) = (uid, start_unix) else {
        bail!("no uid or start time for job {job_id}: Slurm does not know the job.\nhint: give --uid and --start (Unix seconds), or run from EpilogSlurmctld");
    };
    Ok(Incarnation { uid, start_unix })
}

/// Each node that gave no usable answer, or a refused one, in one line naming the job, the
/// node and why (what an admin looks for when a summary is missing).
fn log_failed_nodes(who: &str, job: &str, answers: &[(String, NodeAnswer)]) {
    for (node, a) in answers {
        match a {
            NodeAnswer::Failed(why) | NodeAnswer::Busy(why) => {
                eprintln!("slurmwatch {who}: job {job}: node {node}: no summary: {why}")
            }
            NodeAnswer::Refused(why) => eprintln!(
                "slurmwatch {who}: job {job}: node {node}: summary refused, not stored: {why}"
            ),
            NodeAnswer::Recorded(_) | NodeAnswer::NotRecorded => {}
        }
    }
}

/// How the AdminComment is stored, and so in which format.
pub(crate) struct CommentStore {
    /// `slurmwatch-dbd-comment` and the cluster: slurmdbd's API, which keeps the case.
    pub dbd_comment: Option<(String, String)>,
    /// The store keeps the value's case: jobstats' `JS1:`; otherwise the older `SW1:`.
    pub case_kept: bool,
}

/// `slurmwatch-dbd-comment` (`--dbd-comment`, else next to this executable) and the cluster
/// it stores for (`SLURM_CLUSTER_NAME`); without them sacctmgr, which keeps the case from
/// Slurm 24.11 on ([`admin_comment_store::SACCTMGR_KEEPS_CASE_SINCE`]). The older format is
/// said in a line naming `who` ("ctld-epilog: job 12").
pub(crate) fn comment_store(given: Option<std::path::PathBuf>, who: &str) -> CommentStore {
    let helper = given.or_else(|| {
        let p = std::env::current_exe()
            .ok()?
            .with_file_name("slurmwatch-dbd-comment");
        p.is_file().then_some(p)
    });
    // slurmctld names the cluster to its EpilogSlurmctld; by hand, slurm.conf does.
    let cluster = std::env::var("SLURM_CLUSTER_NAME")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| slurmwatch_core::site::Site::here().cluster.clone());
    if let (Some(h), Some(c)) = (helper, &cluster) {
        return CommentStore {
            dbd_comment: Some((h.to_string_lossy().into_owned(), c.clone())),
            case_kept: true,
        };
    }
    let why = if cluster.is_none() {
        "no slurmwatch-dbd-comment or no SLURM_CLUSTER_NAME"
    } else {
        "no slurmwatch-dbd-comment"
    };
    let release = admin_comment_store::sacctmgr_keeps_case("sacctmgr", Duration::from_secs(10));
    let case_kept = matches!(release, Ok((_, true)));
    if !case_kept {
        let said = match release {
            Ok((r, _)) => format!("Slurm {r}'s sacctmgr lowercases it"),
            Err(e) => format!("sacctmgr's release unknown ({e})"),
        };
        eprintln!(
            "slurmwatch {who}: storing through sacctmgr ({why}), in the older SW1: format that survives lowercasing ({said}): jobstats' readers will not read it"
        );
    }
    CommentStore {
        dbd_comment: None,
        case_kept,
    }
}

pub fn run(args: CtldEpilogArgs) -> Result<i32> {
    let names = settled_names(args.job).filter(|_| !args.dry_run);
    let outcome = store_summary(args);
    // Whatever the outcome: the job's held end-of-job mail goes now (`mail_hold`).
    for job in names.into_iter().flatten() {
        settle(&job);
    }
    outcome
}

/// The job's own id, and its array name (`SLURM_ARRAY_*` from EpilogSlurmctld's environment)
/// when it has one: the held mail is looked for under either (an array's first task gets its
/// EpilogSlurmctld without the array's variables; 22.05).
fn settled_names(given: Option<u32>) -> Option<Vec<String>> {
    let id = given.or_else(|| JobId::own(&std::env::var("SLURM_JOB_ID").ok()?))?;
    let named = admin_comment_store::job_ref(
        id,
        std::env::var("SLURM_ARRAY_JOB_ID").ok().as_deref(),
        std::env::var("SLURM_ARRAY_TASK_ID").ok().as_deref(),
    );
    let own = id.to_string();
    Some(if named == own {
        vec![own]
    } else {
        vec![own, named]
    })
}

/// Marks the job settled in the held mails' queue (`slurmwatch_core::mailq`), on this
/// controller's StateSaveLocation; said in one line when it cannot be.
fn settle(job: &str) {
    let Some(dir) = slurmwatch_core::site::Site::here()
        .state_save_location
        .as_deref()
    else {
        return;
    };
    if let Err(e) = slurmwatch_core::mailq::Queue::under(dir).settle(job) {
        eprintln!("slurmwatch ctld-epilog: job {job}: {e}; its held mail goes at its bound");
    }
}

fn store_summary(args: CtldEpilogArgs) -> Result<i32> {
    let (url, timeout) = crate::site::summary_endpoint(args.url, args.timeout)?;
    let deadline = Instant::now() + timeout;
    let job_id = match args.job {
        Some(j) => j,
        None => match std::env::var("SLURM_JOB_ID").ok().and_then(|j| JobId::own(&j)) {
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
    let run = job_run(job_id, args.uid, args.start)?;
    let job = admin_comment_store::job_ref(
        job_id,
        std::env::var("SLURM_ARRAY_JOB_ID").ok().as_deref(),
        std::env::var("SLURM_ARRAY_TASK_ID").ok().as_deref(),
    );
    let elapsed = admin_comment_store::elapsed(
        "scontrol",
        &job_id.to_string(),
        timeout.min(Duration::from_secs(10)),
    );
    let store = comment_store(args.dbd_comment, &format!("ctld-epilog: job {job}"));
    let how = How {
        url: &url,
        dbd_comment: store
            .dbd_comment
            .as_ref()
            .map(|(h, c)| (h.as_str(), c.as_str())),
        case_kept: store.case_kept,
        dry_run: args.dry_run,
        who: "ctld-epilog",
    };
    let one = OneJob {
        job_id,
        job: &job,
        nodes: &nodes,
        run,
        elapsed,
        unanswered_before: None,
    };
    match summarise_and_store(&one, &how, deadline)? {
        Done::Printed(comment) => println!("{comment}"),
        // Most jobs of a site that records on request: nothing to say.
        Done::NotRecorded => {}
        done => eprintln!("slurmwatch ctld-epilog: job {job}: {}", done.said()),
    }
    Ok(0)
}

/// How a job's summary is collected and stored (the EpilogSlurmctld's and the backfill's).
pub(crate) struct How<'a> {
    /// The nodes' summary URL template.
    pub url: &'a str,
    /// `slurmwatch-dbd-comment` and the cluster, else sacctmgr.
    pub dbd_comment: Option<(&'a str, &'a str)>,
    /// The store keeps the value's case ([`CommentStore::case_kept`]).
    pub case_kept: bool,
    /// Print the AdminComment instead of storing it.
    pub dry_run: bool,
    /// The command, in log lines.
    pub who: &'a str,
}

/// One finished job to collect and store.
pub(crate) struct OneJob<'a> {
    pub job_id: u32,
    /// As sacctmgr and sacct name it ([`admin_comment_store::job_ref`]).
    pub job: &'a str,
    pub nodes: &'a [String],
    pub run: Incarnation,
    pub elapsed: Option<u64>,
    /// For a job whose stored summary is partial (`ctld-backfill`): how many of its nodes
    /// gave no figures then. A new one is stored only when fewer are missing.
    pub unanswered_before: Option<usize>,
}

/// What became of one job's summary.
pub(crate) enum Done {
    /// Every node answered, and none holds a recording of the job.
    NotRecorded,
    /// Nothing recorded among the answers, and this many nodes gave none (each logged).
    Unanswered(usize),
    Printed(String),
    Stored {
        recorded: usize,
        nodes: usize,
        bytes: usize,
    },
    /// Another tool's AdminComment, left as it was (its first characters).
    LeftOthers(String),
    /// A partial summary asked again, and as many nodes (or more) still gave no answer: the
    /// stored one is kept.
    StillPartial(usize),
}

impl Done {
    /// The log line's text after `job N: `.
    pub(crate) fn said(&self) -> String {
        match self {
            Done::NotRecorded => "recorded on none of its nodes; nothing stored".into(),
            Done::Unanswered(n) => {
                format!("{n} node(s) gave no answer and no other holds a recording; nothing stored")
            }
            Done::Printed(c) => format!("{} bytes printed, not stored", c.len()),
            Done::Stored {
                recorded,
                nodes,
                bytes,
            } => format!(
                "summary of {recorded} of {nodes} node(s) stored in AdminComment ({bytes} bytes)"
            ),
            Done::LeftOthers(c) => {
                format!("AdminComment already holds another tool's text ({c}…); left as it was")
            }
            Done::StillPartial(n) => {
                format!("{n} node(s) still gave no answer; the partial summary stored is kept")
            }
        }
    }
}

/// Asks the job's nodes (a busy one again within two thirds of the time left), logs each
/// node without a usable answer with its reason, joins the answers and stores them by
/// `deadline`.
pub(crate) fn summarise_and_store(one: &OneJob, how: &How, deadline: Instant) -> Result<Done> {
    let verifier = admin_comment_store::Verifier::default();
    let query = admin_comment_store::Query {
        template: how.url,
        job_id: one.job_id,
        run: one.run,
        nodes: one.nodes,
        verifier: &verifier,
    };
    // Asking nodes again leaves the store at least a third of the time (slurmdbd may not
    // have the job's record for the first seconds).
    let collect_until = Instant::now() + deadline.saturating_duration_since(Instant::now()) * 2 / 3;
    let answers = admin_comment_store::collect(&query, collect_until);
    log_failed_nodes(how.who, one.job, &answers);
    let unanswered = answers
        .iter()
        .filter(|(_, a)| !matches!(a, NodeAnswer::Recorded(_) | NodeAnswer::NotRecorded))
        .count();
    if one
        .unanswered_before
        .is_some_and(|before| unanswered >= before)
    {
        return Ok(Done::StillPartial(unanswered));
    }
    let comment =
        match admin_comment_store::comment_for(one.job_id, &answers, one.elapsed, how.case_kept) {
            None => {
                return Ok(match unanswered {
                    0 => Done::NotRecorded,
                    n => Done::Unanswered(n),
                });
            }
            Some(Err(e)) => bail!("job {}: {e}", one.job),
            Some(Ok(c)) => c,
        };
    if how.dry_run {
        return Ok(Done::Printed(comment));
    }
    let recorded = answers
        .iter()
        .filter(|(_, a)| matches!(a, NodeAnswer::Recorded(_)))
        .count();
    let programs = admin_comment_store::Programs {
        dbd_comment: how.dbd_comment,
        ..admin_comment_store::Programs::default()
    };
    match admin_comment_store::store(one.job, &comment, programs, deadline) {
        Ok(Stored::Written) => Ok(Done::Stored {
            recorded,
            nodes: one.nodes.len(),
            bytes: comment.len(),
        }),
        Ok(Stored::LeftOthers(c)) => Ok(Done::LeftOthers(c.chars().take(12).collect())),
        Err(e) => bail!("{e}"),
    }
}

fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// The job's uid and start time as slurmctld holds it (`squeue`), else slurmdbd (`sacct`),
/// both in the pinned `standard` time format.
fn run_from_slurm(job_id: u32) -> Option<(u32, i64)> {
    let job = job_id.to_string();
    let parse = |text: &str, sep: char| {
        let (uid, start) = text.trim().split_once(sep)?;
        Some((uid.trim().parse().ok()?, sacct::parse_time(start)?))
    };
    let timeout = command::DEFAULT_TIMEOUT;
    command::run(
        "squeue",
        &["-h", "-t", "all", "-j", &job, "-o", "%U %S"],
        timeout,
    )
    .ok()
    .filter(|f| f.success)
    .and_then(|f| parse(&f.stdout, ' '))
    .or_else(|| {
        command::run_dbd_client(
            "sacct",
            &["-j", &job, "-X", "-n", "-P", "-o", "UID,Start"],
            timeout,
        )
        .ok()
        .filter(|f| f.success)
        .and_then(|f| parse(f.stdout.lines().next().unwrap_or(""), '|'))
    })
}
