//! `slurmwatch jobs`: one line per job for many jobs (reportseff's table), from one sacct
//! query for the set and each job's recording or slurmdbd summary where there is one; the
//! figures are each job's report's (core/src/jobs).
//!
//! Exit codes: 0 the table was printed; 1 sacct knows none of the jobs asked for; 2 bad
//! usage (an unknown column, an unreadable id or file name) or sacct missing, failing or not
//! answering in time.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use slurmwatch_core::jobs::{array, columns, row::Row, select};
use slurmwatch_core::locate::Locator;
use slurmwatch_core::report;
use slurmwatch_core::slurm::sacct::{self, Window};

#[derive(clap::Args)]
pub struct JobsArgs {
    /// Job ids (123), array tasks (123_4, 123_[1-50]; 123 is every task), Slurm output
    /// files (slurm-123.out, slurm-123_4.out) or directories of them.
    #[arg(value_name = "JOB|FILE|DIR")]
    pub jobs: Vec<String>,
    /// Only these users' jobs (comma-separated); without job ids, their jobs of the window.
    #[arg(short = 'u', long, value_name = "USERS", value_delimiter = ',')]
    pub user: Vec<String>,
    /// Start of the window when no job is named: 2026-11-01, 2026-11-01T08:00, now-7d, 12h.
    #[arg(short = 'S', long, value_name = "TIME")]
    pub since: Option<String>,
    /// End of the window (same forms; default now).
    #[arg(short = 'E', long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only jobs in these states (comma-separated: COMPLETED,FAILED,TIMEOUT or CD,F,TO).
    #[arg(short = 's', long, value_name = "STATES", value_delimiter = ',')]
    pub state: Vec<String>,
    /// Columns, comma-separated (JobID, JobName, User, State, ExitCode, Elapsed, TimeEff,
    /// CPUEff, MemEff, GPUEff, GPUMem, Basis).
    #[arg(long, value_name = "COLUMNS")]
    pub format: Option<String>,
    /// One row per array, summarising its tasks, in place of the tasks' rows (JSON: added as
    /// `arrays[]`).
    #[arg(long)]
    pub array_summary: bool,
    /// Print JSON (schema in docs/reference/json.md).
    #[arg(long, conflicts_with_all = ["csv", "parsable"])]
    pub json: bool,
    /// Print CSV (cells that a spreadsheet would run as a formula get a leading ').
    #[arg(long, conflicts_with = "parsable")]
    pub csv: bool,
    /// Print `|`-separated lines, a header first (like sacct --parsable2).
    #[arg(long)]
    pub parsable: bool,
    /// Where the plugin writes per-job files; default: the site's plugstack.conf `spool=`.
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// Also look for the jobs' files here (an archive directory; repeatable).
    #[arg(long, value_name = "DIR", action = clap::ArgAction::Append)]
    pub archive: Vec<PathBuf>,
    /// Seconds the one sacct query may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub sacct_timeout: u64,
}

/// sacct's short state codes, as `--state` accepts them.
const STATE_CODES: &[(&str, &str)] = &[
    ("CD", "COMPLETED"),
    ("F", "FAILED"),
    ("TO", "TIMEOUT"),
    ("CA", "CANCELLED"),
    ("OOM", "OUT_OF_MEMORY"),
    ("NF", "NODE_FAIL"),
    ("PD", "PENDING"),
    ("R", "RUNNING"),
    ("PR", "PREEMPTED"),
    ("BF", "BOOT_FAIL"),
    ("DL", "DEADLINE"),
    ("RQ", "REQUEUED"),
    ("S", "SUSPENDED"),
];

fn states(args: &[String]) -> Vec<String> {
    args.iter()
        .map(|s| {
            let u = s.trim().to_ascii_uppercase();
            STATE_CODES
                .iter()
                .find(|(c, _)| *c == u)
                .map_or(u, |(_, n)| n.to_string())
        })
        .collect()
}

/// The one sacct query: the named jobs (`-j a,b,c`), else the users' jobs of the window.
fn query(args: &JobsArgs, q: &sacct::Query) -> anyhow::Result<Vec<sacct::JobAccounting>> {
    let ids = select::resolve(&args.jobs).map_err(|e| {
        anyhow::anyhow!(
            "{e}.\nhint: e.g. `slurmwatch jobs 123_[1-50]` or `slurmwatch jobs slurm-123.out`"
        )
    })?;
    if !args.jobs.is_empty() {
        if args.since.is_some() || args.until.is_some() {
            bail!("-S/-E select jobs by time; they cannot narrow named jobs.\nhint: name the jobs, or give -S/-E (and -u) without them");
        }
        return Ok(q.jobs(&ids)?.records);
    }
    let now = slurmwatch_core::sys::now_unix_s();
    let when = |s: &Option<String>, default: &str, flag: &str| {
        let s = s.as_deref().unwrap_or(default);
        crate::history::parse_when(s, now).ok_or_else(|| {
            anyhow::anyhow!(
                "cannot read {flag} {s:?}.\nhint: use 2026-11-01, 2026-11-01T08:00, now-7d or 12h"
            )
        })
    };
    // sacct's own default window: since midnight.
    let midnight = slurmwatch_core::sys::local_time(now)
        .map(|t| t.date())
        .unwrap_or_else(|| "now-1d".into());
    let w = Window {
        since_unix: when(&args.since, &midnight, "--since")?,
        until_unix: when(&args.until, "now", "--until")?,
        users: args.user.clone(),
        all_users: false,
        partition: None,
    };
    Ok(q.window(&w)?.records)
}

pub fn run(args: JobsArgs) -> anyhow::Result<i32> {
    let cols = match &args.format {
        Some(f) => columns::parse_format(f)
            .map_err(|e| anyhow::anyhow!("{e}.\nhint: e.g. --format JobID,State,CPUEff,MemEff"))?,
        None => columns::DEFAULT.to_vec(),
    };
    let q = sacct::Query {
        timeout: Duration::from_secs(args.sacct_timeout.max(1)),
        ..sacct::Query::default()
    };
    let mut records = query(&args, &q)?;
    let wanted_states = states(&args.state);
    records.retain(|r| {
        (wanted_states.is_empty() || wanted_states.contains(&r.job.state.name))
            && (args.user.is_empty() || r.job.user.as_ref().is_some_and(|u| args.user.contains(u)))
    });
    if records.is_empty() {
        eprintln!("slurmwatch: sacct shows no job of that selection.");
        return Ok(1);
    }
    let site = slurmwatch_core::site::Site::here();
    let spool = args.spool.as_deref().unwrap_or(site.spool_template());
    let mut locator = Locator::site(args.spool.as_deref(), &args.archive);
    let rows: Vec<Row> = records
        .iter()
        .map(|acct| {
            // As the report: the job's files, else its summary in slurmdbd, else sacct. A
            // damaged file costs its row the recording, not the table; without its own id
            // (no JobIDRaw for an array task) no file is looked for.
            let found = acct
                .raw_id()
                .map(|raw| crate::report::site_recordings(&mut locator, spool, raw, Some(acct)));
            let mut recs = match found.unwrap_or_else(|| Ok((Vec::new(), String::new()))) {
                Ok((r, _)) => r,
                Err(e) => {
                    eprintln!(
                        "slurmwatch: note: job {}: {e:#}; its row is from sacct",
                        acct.job.job_id
                    );
                    Vec::new()
                }
            };
            if recs.is_empty() {
                recs = report::recordings::from_admin_comment(Some(acct)).0;
            }
            let rep = report::build(&acct.job.job_id, &recs, Some(acct), None, None);
            Row::new(acct, &rep)
        })
        .collect();
    let arrays = args.array_summary.then(|| array::summarise(&rows));
    let out = if args.json {
        columns::json(&rows, arrays.as_deref())
    } else {
        let lines = lines(&rows, arrays.as_deref());
        if args.csv {
            columns::csv(&lines, &cols)
        } else if args.parsable {
            columns::parsable(&lines, &cols)
        } else {
            columns::text(&lines, &cols)
        }
    };
    crate::output::print(&out).map_err(anyhow::Error::msg)?;
    Ok(0)
}

/// Each job's row, with an array's summary in place of its first task and its other tasks
/// left out when summaries are asked for.
fn lines<'a>(rows: &'a [Row], arrays: Option<&'a [array::ArrayRow]>) -> Vec<columns::Line<'a>> {
    let Some(arrays) = arrays else {
        return rows.iter().map(columns::Line::Job).collect();
    };
    let mut shown = std::collections::HashSet::new();
    let mut out = Vec::new();
    for r in rows {
        match r
            .array_job_id
            .as_ref()
            .and_then(|a| arrays.iter().find(|x| &x.array_job_id == a))
        {
            Some(a) => {
                if shown.insert(a.array_job_id.clone()) {
                    out.push(columns::Line::Array(a));
                }
            }
            None => out.push(columns::Line::Job(r)),
        }
    }
    out
}
