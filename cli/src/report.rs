//! `slurmwatch report JOB`: the post-mortem — the job's recording joined with sacct.
//!
//! Exit codes: 0 the report was printed; 2 bad usage or input that cannot be reported on
//! (an unreadable, truncated, corrupt or newer-schema file; an unknown job; sacct missing or
//! hanging), with one sentence and a hint. The job's file is opened read-only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use slurmwatch_core::locate::Locator;
use slurmwatch_core::render::terminal;
use slurmwatch_core::report::{self, chart, ended, text, NodeRecording};
use slurmwatch_core::slurm::job_id::{self, JobId};
use slurmwatch_core::slurm::sacct::{self, SacctError};

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Job id (12345, or an array task 12345_7).
    pub job: String,
    /// Read this file instead of looking for the job's files (an archive copy; repeat for
    /// each node of a multi-node job).
    #[arg(long, value_name = "PATH", action = clap::ArgAction::Append)]
    pub file: Vec<PathBuf>,
    /// Where the plugin writes per-job files (`%n`: the node name); default: the site's
    /// plugstack.conf `spool=`, else /var/spool/slurmwatch.
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// Also look for the job's files here (an archive directory; repeatable). The site's
    /// plugstack.conf `archive=` is always searched.
    #[arg(long, value_name = "DIR", action = clap::ArgAction::Append)]
    pub archive: Vec<PathBuf>,
    /// Print the report as JSON (schema in docs/reference/json.md).
    #[arg(long)]
    pub json: bool,
    /// Also write the charts as an SVG file: memory and cores, step boundaries, the marked
    /// phases, and the throughput in a third panel when the job's log gave one.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Also write a self-contained HTML report (no network, no script): the same SVG, with
    /// the text report around it.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Do not ask sacct: report from the recording alone.
    #[arg(long)]
    pub no_sacct: bool,
    /// Seconds to wait for sacct before giving up.
    #[arg(long, value_name = "SECONDS", default_value_t = 20)]
    pub sacct_timeout: u64,
    /// The job's output file to scan, instead of the one Slurm recorded (repeat for stderr).
    #[arg(long = "log", value_name = "FILE", num_args = 1, action = clap::ArgAction::Append)]
    pub logs: Vec<PathBuf>,
    /// Do not look at the job's stdout/stderr.
    #[arg(long)]
    pub no_log: bool,
    /// Also read progress lines of this pattern file (one regular expression a line with
    /// named groups; docs/guide.md, "The job's progress, from its log").
    #[arg(long, value_name = "FILE")]
    pub progress_patterns: Option<PathBuf>,
    /// Report only a job of USER: sacct's record must name USER (else exit 2), and a file
    /// recording another user is not used. The MailProg wrapper passes the user Slurm named
    /// for the mail.
    #[arg(long, value_name = "USER", conflicts_with = "no_sacct")]
    pub owner: Option<String>,
    /// The job has just ended: ask sacct every 2 s for up to SECONDS until slurmdbd has its
    /// whole record (not none yet, still running, or its stand-in row without the request).
    /// For the MailProg wrapper: Slurm mails as the job ends.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub wait_ended: u64,
}

/// How long `scontrol show job` may take for the log's location.
const SCONTROL_TIMEOUT: Duration = Duration::from_secs(10);

/// `scontrol show job -o JOB`'s output, asked on a thread while sacct answers: the two go to
/// different daemons (slurmctld, slurmdbd), so the report waits for the slower, not the sum.
type Controller = std::thread::JoinHandle<Option<String>>;

/// Starts [`Controller`] when the log will be looked for (no `--log`, `--no-log`, `--no-sacct`).
fn ask_controller(args: &ReportArgs) -> Option<Controller> {
    if args.no_log || args.no_sacct || !args.logs.is_empty() {
        return None;
    }
    let job = args.job.clone();
    let timeout = SCONTROL_TIMEOUT.min(Duration::from_secs(args.sacct_timeout.max(1)));
    std::thread::Builder::new()
        .spawn(move || slurmwatch_core::slurm::scontrol::show_job_record(&job, timeout))
        .ok()
}

/// Finds the job's stdout/stderr, reads their tails, scans them (see report::joblog).
///
/// The owner whose files may be read: what the controller says (`scontrol`), else the uid the
/// plugin recorded from the job's credential, else sacct's `UID` (which can read 0 for a
/// moment after a short job ends, before slurmdbd has the job's start record).
fn attach_log(
    rep: &mut report::Report,
    args: &ReportArgs,
    acct: Option<&sacct::JobAccounting>,
    recorded_uid: Option<u32>,
    controller: Option<Controller>,
    (progress, patterns): (
        Option<&report::throughput::ProgressInputs>,
        &slurmwatch_core::analysis::progress::Patterns,
    ),
) {
    use slurmwatch_core::report::joblog;
    let mut owner = recorded_uid.or(rep.job.uid);
    let files: joblog::LogPaths = if !args.logs.is_empty() {
        args.logs
            .iter()
            .take(2)
            .map(|p| ("given", p.clone(), "option"))
            .collect()
    } else if args.no_sacct {
        let info = joblog::LogInfo {
            note: Some(
                "Slurm was not asked (--no-sacct): give the job's output file with --log FILE."
                    .into(),
            ),
            ..Default::default()
        };
        rep.attach_log(info, &Default::default());
        return;
    } else {
        let out = controller.and_then(|h| h.join().ok().flatten());
        let raw = acct.and_then(sacct::JobAccounting::raw_id);
        let located;
        (located, owner) = joblog::locate(out.as_deref(), acct, raw, owner);
        located
    };
    let (mut info, scan) = joblog::gather(&files, owner);
    if files.is_empty() {
        info.note = Some(
            "Slurm did not say where this job wrote its output; give its path with --log FILE."
                .into(),
        );
    }
    rep.attach_log(info, &scan);
    if let Some(t) =
        progress.and_then(|p| report::throughput::from_files(&files, owner, p, (patterns, None)))
    {
        rep.attach_throughput(t);
    }
}

pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    if JobId::job_or_task(&args.job).is_none() {
        bail!(
            "{:?} is not a job id.\nhint: give the number sbatch printed, e.g. `slurmwatch report 12345` (array task: 12345_7)",
            args.job
        );
    }
    let patterns = progress_patterns(args.progress_patterns.as_deref())?;
    // First: a broken site file is refused before any daemon is asked.
    let site = crate::site::Site::load()?;
    let controller = ask_controller(&args);
    // sacct first: an array task's file is named by its raw job id.
    let acct = ask_sacct(&args)?;
    if let Some(owner) = &args.owner {
        check_owner(&args.job, owner, acct.as_ref())?;
    }
    // The job's own id (the one rule, `slurm::job_id::raw_id`): sacct's JobIDRaw, else the
    // id given when it is a job's own; an array task's is sacct's to tell.
    let raw_id = job_id::raw_id(
        acct.as_ref()
            .and_then(|a| a.job.fields.get("JobIDRaw"))
            .map(String::as_str),
        &args.job,
    );
    let (mut recordings, why_none) = find_recordings(&args, raw_id, acct.as_ref())?;
    // No file here (a login node, or the files are gone): the summary the controller stored
    // in slurmdbd, when there is one.
    let mut summary_note = None;
    if recordings.is_empty() && args.file.is_empty() {
        (recordings, summary_note) = report::recordings::from_admin_comment(acct.as_ref());
    }
    if let Some(owner) = &args.owner {
        keep_owners(&mut recordings, owner);
    }
    if recordings.is_empty() && acct.is_none() {
        if args.no_sacct {
            bail!(
                "job {}: {} and --no-sacct was given.\nhint: point --file at the job's file (an archive copy), or drop --no-sacct",
                args.job,
                why_none
            );
        }
        bail!(
            "sacct knows no job {} and {}.\nhint: check the id (`sacct -u $USER`); on another cluster, run the report there",
            args.job,
            why_none
        );
    }
    let mut rep = report::build_with(
        &args.job,
        &recordings,
        acct.as_ref(),
        args.no_sacct.then(|| "--no-sacct was given".to_string()),
        recordings.is_empty().then_some(why_none),
        &site.thresholds,
    );
    rep.notes.extend(summary_note);
    if acct.is_some() {
        note_other_jobs(&mut rep, &recordings, raw_id, &args.job);
    }
    if !args.no_log {
        attach_log(
            &mut rep,
            &args,
            acct.as_ref(),
            recordings.first().map(|r| r.meta.uid),
            controller,
            (
                recordings
                    .iter()
                    .map(|r| &r.progress)
                    .find(|p| !p.is_empty()),
                &patterns,
            ),
        );
    }
    attach_card_history(&mut rep, &args, &recordings);
    site.annotate(&mut rep.findings);
    if let Some(p) = &args.svg {
        write_file(p, &chart::svg(&rep))?;
    }
    if let Some(p) = &args.html {
        write_file(p, &chart::html(&rep))?;
    }
    let out = if args.json {
        rep.to_json() + "\n"
    } else {
        text::render(&rep, false)
    };
    crate::output::print(&out).map_err(anyhow::Error::msg)?;
    Ok(0)
}

/// The `--progress-patterns` file, read by the caller (bad input: one sentence, exit 2).
fn progress_patterns(
    path: Option<&std::path::Path>,
) -> anyhow::Result<slurmwatch_core::analysis::progress::Patterns> {
    let Some(path) = path else {
        return Ok(Default::default());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    slurmwatch_core::analysis::progress::parse_patterns(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// sacct's record of the job (`None`: sacct does not know it, or `--no-sacct`), waited for
/// up to `--wait-ended` seconds until slurmdbd has it whole.
fn ask_sacct(args: &ReportArgs) -> anyhow::Result<Option<sacct::JobAccounting>> {
    if args.no_sacct {
        return Ok(None);
    }
    let q = sacct::Query {
        timeout: Duration::from_secs(args.sacct_timeout.max(1)),
        ..sacct::Query::default()
    };
    match ended::wait(Duration::from_secs(args.wait_ended), &ended::PACING, || {
        q.job(&args.job)
    }) {
        Ok(r) => Ok(Some(r)),
        Err(SacctError::UnknownJob(_)) => Ok(None),
        Err(e) => bail!("{e}"),
    }
}

/// A note for each file that records another job than `raw_id` (a file named by hand);
/// `job` as given when its own id is not known.
fn note_other_jobs(
    rep: &mut report::Report,
    recordings: &[NodeRecording],
    raw_id: Option<u32>,
    job: &str,
) {
    let wanted = raw_id.map_or_else(|| job.to_string(), |r| r.to_string());
    for r in recordings {
        if raw_id.map(u64::from) != Some(r.meta.job_id) {
            rep.notes.push(format!(
                "The file {} records job {}, not {}: its figures are that job's.",
                r.path.display(),
                r.meta.job_id,
                wanted
            ));
        }
    }
}

/// `--owner`: the job is `owner`'s by sacct's record, or the report stops (exit 2). A job
/// sacct does not know cannot be checked, so it is refused too.
fn check_owner(job: &str, owner: &str, acct: Option<&sacct::JobAccounting>) -> anyhow::Result<()> {
    if owner.is_empty() {
        bail!("--owner needs a user name.\nhint: --owner alice");
    }
    let Some(a) = acct else {
        bail!(
            "sacct knows no job {job}, so it cannot be checked to be {}'s.\nhint: drop --owner to report from the job's files alone",
            terminal::field(owner)
        );
    };
    let user = a.job.user.as_deref().unwrap_or("");
    if user != owner {
        bail!(
            "job {job} belongs to {:?} by sacct's record, not to {}: no report.\nhint: --owner names the job's user (the mail wrapper passes SLURM_JOB_USER)",
            terminal::field(user),
            terminal::field(owner)
        );
    }
    Ok(())
}

/// `--owner`: a file (or stored summary) that records another user is left out, and said.
fn keep_owners(recordings: &mut Vec<NodeRecording>, owner: &str) {
    recordings.retain(|r| {
        let mine = r.meta.user == owner;
        if !mine {
            eprintln!(
                "slurmwatch: note: {} records a job of another user; not used",
                terminal::field(&r.path.display().to_string())
            );
        }
        mine
    });
}

/// The job's files, one per node: `--file` as given (bad input is fatal: a damaged file is
/// never silently replaced by sacct's figures), else every file found in the spool and the
/// archive that records this job (first found per node wins: the live spool before a copy).
/// With nothing found, the reason.
fn find_recordings(
    args: &ReportArgs,
    raw_id: Option<u32>,
    acct: Option<&sacct::JobAccounting>,
) -> anyhow::Result<(Vec<NodeRecording>, String)> {
    if !args.file.is_empty() {
        let mut out: Vec<NodeRecording> = Vec::new();
        for p in &args.file {
            let r = NodeRecording::load(p)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("cannot report on job {} from its file", args.job))?;
            if out.iter().any(|o| o.meta.node == r.meta.node) {
                bail!(
                    "{} and another --file both record node {}.\nhint: give one file per node",
                    p.display(),
                    r.meta.node
                );
            }
            out.push(r);
        }
        return Ok((out, String::new()));
    }
    let Some(raw_id) = raw_id else {
        // An array task's file is named by its own id, which sacct did not give.
        return Ok((
            Vec::new(),
            "its file is named by its own job id, which only sacct tells (JobIDRaw)".into(),
        ));
    };
    let site = slurmwatch_core::site::Site::here();
    let spool = args.spool.as_deref().unwrap_or(site.spool_template());
    let mut locator = Locator::site(args.spool.as_deref(), &args.archive);
    site_recordings(&mut locator, spool, raw_id, acct)
        .with_context(|| format!("cannot report on job {} from its file", args.job))
}

/// The job's files in the places (`raw_id`: the file's job id; see
/// `report::recordings::from_files`), each file found but not used said, and the reason when
/// there are none.
pub(crate) fn site_recordings(
    locator: &mut Locator,
    spool: &Path,
    raw_id: u32,
    acct: Option<&sacct::JobAccounting>,
) -> anyhow::Result<(Vec<NodeRecording>, String)> {
    let found =
        report::recordings::from_files(locator, raw_id, acct).map_err(anyhow::Error::msg)?;
    for n in &found.notes {
        eprintln!("slurmwatch: note: {n}");
    }
    let why = format!("no file for it in {}", spool.display());
    Ok((found.recordings, why))
}

/// How far back the other jobs on a held-back card are looked for: the cards view's window.
const CARD_HISTORY_DAYS: i64 = slurmwatch_core::fleet::cards::DEFAULT_WINDOW_DAYS;

/// For each card held back in this job: how the other recorded jobs that used it fared
/// (`gpu_card_history`), from four weeks before the job started until now. The spool and
/// archives are read only when a card was held back.
fn attach_card_history(rep: &mut report::Report, args: &ReportArgs, recs: &[NodeRecording]) {
    use slurmwatch_core::fleet::{self, cards, history, Window};
    let Some(first) = recs.first() else {
        return;
    };
    // A multi-node job's cards carry their node; a single node's are the file's.
    let mine: Vec<(String, slurmwatch_core::analysis::summary::GpuSummary)> = rep
        .gpus
        .iter()
        .map(|g| {
            (
                g.node.clone().unwrap_or_else(|| first.meta.node.clone()),
                g.clone(),
            )
        })
        .collect();
    if !mine
        .iter()
        .any(|(_, g)| cards::seen(g) == cards::Seen::HeldBack)
    {
        return;
    }
    let now_ms = slurmwatch_core::sys::now_unix_ms();
    let start = rep
        .job
        .start_unix
        .map(|s| s * 1000)
        .unwrap_or(first.meta.started_unix_ms);
    let w = Window {
        since_unix_ms: start - CARD_HISTORY_DAYS * 86_400_000,
        until_unix_ms: now_ms.max(start),
    };
    // The summaries in slurmdbd (other users' jobs too, where sacct shows them), then files.
    let others = fleet::gather_site(
        args.spool.as_deref(),
        &args.archive,
        (!args.no_sacct).then(|| Duration::from_secs(args.sacct_timeout.max(1))),
        &w,
    );
    let job_id = first.meta.job_id.to_string();
    for h in history::for_job(&job_id, &mine, &others.jobs) {
        if let Some(f) = history::finding(&h) {
            rep.findings.push(f);
        }
    }
}

fn write_file(p: &Path, content: &str) -> anyhow::Result<()> {
    std::fs::write(p, content).with_context(|| format!("cannot write {}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurmwatch_core::analysis::Summary;
    use slurmwatch_core::model::{SampleKind, SampleRow, Series};
    use slurmwatch_core::sample::Source;
    use slurmwatch_core::store::{JobMeta, StepInfo};

    fn recording() -> NodeRecording {
        const MIB: u64 = 1 << 20;
        let t0 = 1_700_000_000_000;
        let rows: Vec<SampleRow> = (0..100)
            .map(|i| {
                let mut r = SampleRow::empty(t0 + i * 5000, Series::Job, SampleKind::Periodic);
                r.usage.cpu_usage_usec = Some(i as u64 * 4_000_000);
                r.usage.memory_working_set_bytes = Some((100 + i as u64) * MIB);
                r.usage.memory_cache_bytes = if i == 50 { None } else { Some(50 * MIB) };
                r.usage.memory_limit_bytes = Some(1024 * MIB);
                r.cores_allocated = Some(2);
                r
            })
            .collect();
        let steps = vec![StepInfo {
            step: "batch".into(),
            started_unix_ms: Some(t0),
            ended_unix_ms: Some(t0 + 99 * 5000),
            tasks: Some(1),
            exit_status: Some(0),
        }];
        let summary = Summary::compute(&rows, &steps, &[], &[], Vec::new());
        NodeRecording {
            path: "/x/1.sqlite".into(),
            origin: Default::default(),
            meta: JobMeta {
                job_id: 1,
                user: "a<b>".into(),
                uid: 1000,
                node: "n1".into(),
                cluster: None,
                plugin_version: "0".into(),
                interval_seconds: 5,
                source: Source::CgroupV1,
                cores_allocated: Some(2),
                memory_allocated_bytes: None,
                started_unix_ms: t0,
                incarnation: None,
            },
            steps,
            events: Vec::new(),
            job_rows: rows,
            summary,
            summary_stored: false,
            step_figures: Default::default(),
            phases: Vec::new(),
            progress: Default::default(),
        }
    }

    #[test]
    fn svg_parses_and_has_the_series() {
        let recording = recording();
        let rep = report::build("1", std::slice::from_ref(&recording), None, None, None);
        let svg = chart::svg(&rep);
        let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
        for id in [
            "series-working-set",
            "series-cache",
            "series-limit",
            "series-cores",
            "series-allocated",
            "step-batch",
        ] {
            let g = doc
                .descendants()
                .find(|n| n.attribute("id") == Some(id))
                .unwrap_or_else(|| panic!("no {id}"));
            if id.starts_with("series") {
                let pts: usize = g
                    .children()
                    .filter_map(|c| c.attribute("points"))
                    .map(|p| p.split_whitespace().count())
                    .sum();
                assert!(pts >= 90, "{id}: {pts} points");
            }
        }
        // The unreadable cache reading breaks the line instead of drawing a 0.
        let cache = doc
            .descendants()
            .find(|n| n.attribute("id") == Some("series-cache"))
            .unwrap();
        assert_eq!(
            cache
                .children()
                .filter(|c| c.has_tag_name("polyline"))
                .count(),
            2
        );
        let html = chart::html(&rep);
        assert!(html.contains("<svg"));
        // Self-contained: nothing fetched, nothing run.
        assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="));
        assert!(html.contains("a&lt;b&gt;"), "user text is escaped");
    }

    #[test]
    fn sacct_only_report_says_how_to_record() {
        let rep = report::build("7", &[], None, None, Some("no file at /s/7.sqlite".into()));
        assert_eq!(rep.source, "sacct_only");
        assert!(rep.notes[0].contains("#SBATCH --slurmwatch"));
        let v: serde_json::Value = serde_json::from_str(&rep.to_json()).unwrap();
        for k in [
            "schema",
            "job_id",
            "state",
            "exit_code",
            "elapsed_seconds",
            "source",
            "cpu",
            "memory",
            "gpus",
            "findings",
            "sbatch",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert!(v["memory"]["peak_working_set_bytes"].is_null());
        let svg = chart::svg(&rep);
        roxmltree::Document::parse(&svg).unwrap();
    }
}
