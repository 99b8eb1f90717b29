//! `slurmwatch [JOB]`: the live dashboard and the scripting interface (`--once`, `--json`,
//! CSV, `--log`).
//!
//! Finding the job (squeue), choosing the source (the plugin's file, else direct readings on
//! the node, else the same command on the node through `srun --overlap`, else sstat's
//! lifetime summary), then one of three outputs drawn from the same [`Snapshot`].

mod feed;
mod find;
mod live;
mod logfile;
mod nodes;
mod pending;
pub mod screen;
mod signals;
mod throughput;

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use slurmwatch_core::locate::{Locator, Wanted};
use slurmwatch_core::model::Series;
use slurmwatch_core::render::{csv, json};
use slurmwatch_core::slurm::command::{self, CommandError};
use slurmwatch_core::slurm::hostlist;
use slurmwatch_core::slurm::scontrol;
use slurmwatch_core::slurm::squeue::{self, QueryError, QueueEntry, TimeLimit};
use slurmwatch_core::slurm::sstat;
use slurmwatch_core::snapshot::{
    JobFacts, JobState, Reading, Snapshot, SnapshotSource, TimeBudget,
};
use slurmwatch_core::store::JobMeta;

use feed::Feed;
use nodes::Feeds;

pub const EXAMPLES: &str = "\
Examples:
  slurmwatch                      pick one of your running jobs and watch it
  slurmwatch 12345                watch job 12345 (also 12345_3, 12345.0, 123+1)
  slurmwatch 12345 --once --json  one snapshot as JSON, then exit
  slurmwatch 12345 --once         the same as CSV (header and one row)
  slurmwatch 12345 --log run.jsonl --interval 10   log every 10 s until the job ends (.jsonl or .csv)

Exit codes: 0 ok; 1 nothing live to show (pending, ended, not found); 2 bad usage or an
environment that cannot answer (no Slurm, unreadable file); 128+N on signal N.";

#[derive(clap::Args, Default, Debug)]
pub struct WatchArgs {
    /// Job id (12345, 12345_3, 12345.0, 123+1); none lists your running and pending jobs.
    pub job: Option<String>,
    /// Print one snapshot and exit: CSV (header and one row), or JSON with --json.
    #[arg(long)]
    pub once: bool,
    /// One snapshot as JSON (implies --once).
    #[arg(long)]
    pub json: bool,
    /// Headless: write a line to FILE for every reading until the job ends, each as of its
    /// reading; the format follows the extension (.jsonl or .csv).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// With --log: add to FILE instead of replacing it, after the reading of its last line.
    #[arg(long, requires = "log")]
    pub append: bool,
    /// Seconds between refreshes (screen: 1; --log: the recording interval).
    #[arg(long, value_name = "SECONDS")]
    pub interval: Option<f64>,
    /// Plain ASCII screen: no box drawing or block characters.
    #[arg(long)]
    pub ascii: bool,
    /// Read this slurmwatch file (e.g. an archive copy) instead of finding the job's own.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// A multi-node job: show only this node (Slurm's node name).
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// The snapshot as the library's own JSON (what one node's hop sends back).
    #[arg(long, hide = true)]
    pub raw_snapshot: bool,
}

/// How the command ends: an exit code and, for failures, one sentence and a hint.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub message: Option<(String, String)>,
}

impl Outcome {
    pub fn code(code: i32) -> Outcome {
        Outcome {
            code,
            message: None,
        }
    }

    pub fn fail(code: i32, sentence: impl Into<String>, hint: impl Into<String>) -> Outcome {
        Outcome {
            code,
            message: Some((sentence.into(), hint.into())),
        }
    }
}

/// `e` as a sentence: one final full stop, whether or not the message brought its own.
fn sentence(e: impl std::fmt::Display) -> String {
    let s = e.to_string();
    let t = s.trim_end();
    if t.ends_with(['.', '!', '?']) {
        t.to_string()
    } else {
        format!("{t}.")
    }
}

/// Set on the inner run of an `srun --overlap` hop: mark the source and never hop again.
const HOP_ENV: &str = "SLURMWATCH_HOP";

/// Takes only this source (`plugin_file`, `direct`, `srun_hop`, `sstat_summary`; also `file`,
/// `hop`, `sstat`): for tests and scripts, e.g. to reach the hop or sstat on the job's own node.
const SOURCE_ENV: &str = "SLURMWATCH_SOURCE";

/// How long a hop for `--once` may take, srun's step start on the node included.
const HOP_TIMEOUT: Duration = Duration::from_secs(30);

fn forced_source() -> Result<Option<SnapshotSource>, Outcome> {
    let Some(v) = std::env::var_os(SOURCE_ENV) else {
        return Ok(None);
    };
    let v = v.to_string_lossy();
    Ok(Some(match v.trim() {
        "" => return Ok(None),
        "plugin_file" | "file" => SnapshotSource::PluginFile,
        "direct" => SnapshotSource::Direct,
        "srun_hop" | "hop" => SnapshotSource::SrunHop,
        "sstat_summary" | "sstat" => SnapshotSource::SstatSummary,
        other => {
            return Err(usage(format!(
                "{SOURCE_ENV}={other:?} names no source: use plugin_file, direct, srun_hop or sstat_summary."
            )))
        }
    }))
}

pub fn run(args: WatchArgs) -> anyhow::Result<i32> {
    let o = match find_and_show(args) {
        Ok(code) => Outcome::code(code),
        Err(o) => o,
    };
    if let Some((sentence, hint)) = &o.message {
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "slurmwatch: {sentence}");
        if !hint.is_empty() {
            let _ = writeln!(e, "hint: {hint}");
        }
    }
    Ok(o.code)
}

#[derive(Clone)]
enum Mode {
    Json,
    Csv,
    Log(PathBuf),
    Screen,
}

fn usage(sentence: impl Into<String>) -> Outcome {
    Outcome::fail(
        2,
        sentence,
        "See slurmwatch --help for the options and examples.",
    )
}

/// Finds the job and shows it as `args` asks: `--file` as it is, else the running job squeue
/// names, through the first source of the cascade ([`plan`]) that answers.
fn find_and_show(args: WatchArgs) -> Result<i32, Outcome> {
    let mode = mode(&args)?;
    // An explicit file: read it as it is, with Slurm's facts when Slurm is here.
    if let Some(path) = &args.file {
        return watch_file(path, mode, &args);
    }
    let spec = match &args.job {
        Some(j) => Some(find::parse_spec(j).map_err(usage)?),
        None => None,
    };
    let entry = match running_job(spec.as_ref(), &mode, &args)? {
        ControlFlow::Continue(entry) => entry,
        ControlFlow::Break(code) => return Ok(code),
    };
    let step = spec.as_ref().and_then(|s| s.step.clone());
    let mut facts = JobFacts {
        job_id: entry.display_id.clone(),
        step: step.clone(),
        ..JobFacts::default()
    };
    fill_facts(&mut facts, &entry);
    if let Some(n) = &args.node {
        if !slurmwatch_core::options::is_plain_name(n) {
            return Err(usage(format!("--node {n:?} is not a node name.")));
        }
        facts.node = Some(n.clone());
    }
    let hopped = std::env::var_os(HOP_ENV).is_some();
    // The inner run of a hop chooses for itself (its environment is cleared of the choice).
    let forced = if hopped { None } else { forced_source()? };
    let live = Live {
        args: &args,
        queue: QueueInfo::from_entry(&entry),
        series: step.map_or(Series::Job, Series::Step),
        one_shot: matches!(mode, Mode::Json | Mode::Csv),
        mode,
        entry,
        facts,
        hopped,
    };
    for stage in plan(forced, live.hopped, live.one_shot) {
        let answer = match stage {
            Stage::Nodes {
                read_files,
                hop_missing,
            } => live.try_nodes(read_files, hop_missing),
            Stage::Direct => live.try_direct(),
            Stage::JobHop => live.try_job_hop(),
            Stage::SstatSummary => live.try_sstat(),
        };
        if let Some(answer) = answer {
            return answer;
        }
    }
    Err(no_source(&live.entry, forced))
}

/// The output the options ask for; bad combinations and values are usage errors.
fn mode(args: &WatchArgs) -> Result<Mode, Outcome> {
    let mode = match (&args.log, args.once || args.json) {
        (Some(_), true) => return Err(usage("--log and --once/--json do not go together.")),
        (Some(p), false) => Mode::Log(p.clone()),
        (None, true) if args.json => Mode::Json,
        (None, true) => Mode::Csv,
        (None, false) => Mode::Screen,
    };
    if let Some(i) = args.interval {
        if !(0.2..=3600.0).contains(&i) {
            return Err(usage(format!(
                "--interval {i} is out of range: give seconds between 0.2 and 3600."
            )));
        }
    }
    if let Mode::Log(p) = &mode {
        log_format(p)?;
    }
    Ok(mode)
}

/// `--file`: that file as it is, with squeue's facts of its job when Slurm knows it.
fn watch_file(path: &Path, mode: Mode, args: &WatchArgs) -> Result<i32, Outcome> {
    let spec = args
        .job
        .as_deref()
        .map(find::parse_spec)
        .transpose()
        .map_err(usage)?;
    let series = spec
        .as_ref()
        .and_then(|s| s.step.clone())
        .map_or(Series::Job, Series::Step);
    let feed = Feed::open_file(path, series).map_err(|e| {
        Outcome::fail(
            2,
            sentence(&e),
            "Check the path; slurmwatch reads the .sqlite files its plugin writes.",
        )
    })?;
    let meta = feed.meta().cloned().expect("file feed has meta");
    let entry = squeue::query_job(&meta.job_id.to_string())
        .ok()
        .and_then(|e| e.into_iter().next());
    let mut facts = JobFacts {
        job_id: meta.job_id.to_string(),
        step: spec.and_then(|s| s.step),
        ..JobFacts::default()
    };
    let mut queue = QueueInfo::default();
    if let Some(e) = entry {
        queue = QueueInfo::from_entry(&e);
        fill_facts(&mut facts, &e);
    }
    output(mode, Feeds::single(None, feed), facts, queue, args, None)
}

/// The job to watch, running and the caller's own; `Break(code)` when there is nothing
/// live to show and that has been said (a pending job's own answer).
fn running_job(
    spec: Option<&find::JobSpec>,
    mode: &Mode,
    args: &WatchArgs,
) -> Result<ControlFlow<i32, QueueEntry>, Outcome> {
    let mut entry = match spec {
        None => find::choose_own_job()?,
        Some(spec) => resolve(&spec.query)?,
    };
    check_owner(&entry)?;
    if entry.is_pending() {
        match mode {
            Mode::Json => return pending::json(&entry).map(ControlFlow::Break),
            Mode::Screen => match pending::screen(args, &entry)? {
                pending::End::Code(c) => return Ok(ControlFlow::Break(c)),
                // It started while watched: carry on to the live dashboard.
                pending::End::Started => entry = resolve(&entry.display_id)?,
            },
            Mode::Csv | Mode::Log(_) => return Err(pending::explain(&entry)),
        }
    }
    if !entry.is_running() {
        return Err(ended(&entry.display_id, &entry.state));
    }
    Ok(ControlFlow::Continue(entry))
}

/// One source of the live numbers, in the order [`plan`] tries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Per node of the job: its plugin file (`read_files`: in the spool here or the archive
    /// copy), and for one snapshot, an `srun --overlap` hop to each node without one
    /// (`hop_missing`).
    Nodes { read_files: bool, hop_missing: bool },
    /// Readings of the job's processes on this machine.
    Direct,
    /// This same command on the job's first node, through `srun --overlap`.
    JobHop,
    /// sstat's lifetime figures of the running steps: the last resort, labelled as such.
    SstatSummary,
}

/// The cascade: the stages tried, in order, until one answers. `forced`: the one source
/// SLURMWATCH_SOURCE asks for. `hopped`: this is the inner run of a hop, which never hops
/// again and leaves sstat to the outer run. `one_shot`: `--once`/`--json` (a dashboard or
/// a log hops once for the whole job instead of per node).
fn plan(forced: Option<SnapshotSource>, hopped: bool, one_shot: bool) -> Vec<Stage> {
    let allow = |s: SnapshotSource| forced.is_none_or(|f| f == s);
    let read_files = allow(SnapshotSource::PluginFile);
    let hop_missing = !hopped && one_shot && allow(SnapshotSource::SrunHop);
    let mut stages = Vec::new();
    if read_files || hop_missing {
        stages.push(Stage::Nodes {
            read_files,
            hop_missing,
        });
    }
    if allow(SnapshotSource::Direct) {
        stages.push(Stage::Direct);
    }
    if !hopped && allow(SnapshotSource::SrunHop) {
        stages.push(Stage::JobHop);
    }
    if !hopped && allow(SnapshotSource::SstatSummary) {
        stages.push(Stage::SstatSummary);
    }
    stages
}

/// What a plugin file found for `node` is to the job being watched.
#[derive(Debug, PartialEq, Eq)]
enum FileVerdict {
    /// The node's own recording of this job.
    Take,
    /// This job's file, but another node wrote it: a spool without `%n` is the same path for
    /// every node, so on a multi-node job (`several`) a file there is only its writer's.
    OtherNode,
    /// Another job's file at this path.
    OtherJob,
}

fn file_verdict(meta: &JobMeta, job_id: u32, node: &str, several: bool) -> FileVerdict {
    if meta.job_id != u64::from(job_id) {
        FileVerdict::OtherJob
    } else if several && meta.node != node {
        FileVerdict::OtherNode
    } else {
        FileVerdict::Take
    }
}

/// The nodes to reach by a hop for one snapshot: on a multi-node job, those without a
/// feed here (`found[i]`: node i has one); none when one node is all there is (the
/// whole-job hop covers it) or every node answered.
fn nodes_to_hop(found: &[bool]) -> Vec<usize> {
    if found.len() < 2 {
        return Vec::new();
    }
    (0..found.len()).filter(|&i| !found[i]).collect()
}

/// The answer when no stage could read the job: the forced source's failure, or where the
/// numbers are (the node, or a recording next time).
fn no_source(entry: &QueueEntry, forced: Option<SnapshotSource>) -> Outcome {
    if let Some(f) = forced {
        return Outcome::fail(
            2,
            format!(
                "job {} cannot be read from the source {SOURCE_ENV} asks for ({}).",
                entry.display_id,
                f.as_str()
            ),
            format!("Unset {SOURCE_ENV} to let slurmwatch choose."),
        );
    }
    Outcome::fail(
        2,
        format!(
            "job {} is running but this machine has neither its recording nor its processes.",
            entry.display_id
        ),
        format!(
            "Run slurmwatch on {} (srun --jobid={} --overlap --pty slurmwatch {}), or record the job with #SBATCH --slurmwatch.",
            if entry.nodes.is_empty() { "the job's node" } else { &entry.nodes },
            entry.job_id,
            entry.display_id
        ),
    )
}

/// A running job of the caller's and how to show it: what every stage of the cascade
/// shares. Each `try_*` is one stage's IO: `Some(answer)` ends the cascade (the output
/// shown, or an error), `None` passes to the next stage (having said why, as a note).
struct Live<'a> {
    args: &'a WatchArgs,
    mode: Mode,
    entry: QueueEntry,
    facts: JobFacts,
    queue: QueueInfo,
    series: Series,
    one_shot: bool,
    hopped: bool,
}

impl Live<'_> {
    /// Shows `feeds`; `hop` marks the inner run of a hop.
    fn show(&self, feeds: Feeds, facts: JobFacts) -> Option<Result<i32, Outcome>> {
        let hop = self.hopped.then_some(SnapshotSource::SrunHop);
        Some(output(
            self.mode.clone(),
            feeds,
            facts,
            self.queue.clone(),
            self.args,
            hop,
        ))
    }

    /// [`Stage::Nodes`]: the plugin's file of each node, in the spool on the node or the
    /// archive copy; for one snapshot, a hop to each node without one.
    fn try_nodes(&self, read_files: bool, hop_missing: bool) -> Option<Result<i32, Outcome>> {
        let e = &self.entry;
        let mut files = if read_files {
            candidate_files(e)
        } else {
            Vec::new()
        };
        if let Some(want) = &self.args.node {
            files.retain(|(n, _)| n == want);
            if files.is_empty() && read_files {
                return Some(Err(usage(format!(
                    "job {} has no node {want:?} (its nodes: {}).",
                    e.display_id, e.nodes
                ))));
            }
        }
        let mut notes = Vec::new();
        let several = files.len() > 1;
        let mut per_node: Vec<(String, Result<Feed, String>)> = files
            .into_iter()
            .map(|(node, paths)| {
                let feed = self.open_node_file(&node, &paths, several, &mut notes);
                (node, feed)
            })
            .collect();
        // A multi-node job seen from a machine without every node's file (a login node): for
        // one snapshot, each missing node answers through its own `srun --overlap` hop.
        if hop_missing {
            if per_node.is_empty() && !read_files {
                per_node = job_nodes(e, self.args.node.as_deref())
                    .into_iter()
                    .map(|n| (n, Err("not read: only srun hops asked for".to_string())))
                    .collect();
            }
            let found: Vec<bool> = per_node.iter().map(|(_, f)| f.is_ok()).collect();
            hop_missing_nodes(e, &mut per_node, &nodes_to_hop(&found));
        }
        if per_node.iter().any(|(_, f)| f.is_ok()) {
            // A hop runs on one node: only that node's file is its own to show.
            if self.hopped {
                per_node.retain(|(_, f)| f.is_ok());
            }
            return self.show(Feeds::per_node(per_node), self.facts.clone());
        }
        for n in &notes {
            eprintln!("slurmwatch: note: {n}; reading the job directly instead");
        }
        None
    }

    /// The first of `paths` (spool, then archive) that holds `node`'s recording of the job;
    /// what was found instead goes to `notes`.
    fn open_node_file(
        &self,
        node: &str,
        paths: &[PathBuf],
        several: bool,
        notes: &mut Vec<String>,
    ) -> Result<Feed, String> {
        for path in paths.iter().filter(|p| p.exists()) {
            match Feed::open_file(path, self.series.clone()) {
                Ok(f) => match f
                    .meta()
                    .map(|m| file_verdict(m, self.entry.job_id, node, several))
                {
                    Some(FileVerdict::Take) => return Ok(f),
                    Some(FileVerdict::OtherNode) => {}
                    Some(FileVerdict::OtherJob) | None => {
                        notes.push(format!("{} belongs to another job", path.display()))
                    }
                },
                Err(e) => notes.push(e),
            }
        }
        Err(format!("no file for {node} reachable from this machine"))
    }

    /// [`Stage::Direct`]: the job's processes on this machine.
    fn try_direct(&self) -> Option<Result<i32, Outcome>> {
        let slot = self.args.interval.map_or(1, |i| i.round().max(1.0) as u32);
        match scontrol::task_pid(self.entry.job_id) {
            Ok(Some(pid)) => {
                let mut facts = self.facts.clone();
                if let Some(st) = facts.step.take() {
                    eprintln!(
                        "slurmwatch: note: step {st} is not recorded; direct readings cover the whole job"
                    );
                }
                let feed = Feed::direct(pid, self.entry.job_id, slot);
                let node = facts.node.clone();
                self.show(Feeds::single(node, feed), facts)
            }
            Ok(None) | Err(CommandError::NotFound { .. }) => None,
            Err(e) => {
                eprintln!("slurmwatch: note: {e}");
                None
            }
        }
    }

    /// [`Stage::JobHop`]: this same command on the job's first node.
    fn try_job_hop(&self) -> Option<Result<i32, Outcome>> {
        match self.entry.first_node() {
            Some(node) => match hop(&self.entry, &node, &self.mode) {
                Ok(code) => return Some(Ok(code)),
                Err(why) => eprintln!("slurmwatch: note: {why}"),
            },
            None => eprintln!("slurmwatch: note: squeue names no node for the job: no srun hop"),
        }
        None
    }

    /// [`Stage::SstatSummary`]: sstat's lifetime figures of the running steps.
    fn try_sstat(&self) -> Option<Result<i32, Outcome>> {
        let e = &self.entry;
        match sstat::query(e.job_id, sstat::TIMEOUT) {
            Ok(summary) => {
                let mut facts = self.facts.clone();
                if let Some(st) = facts.step.take() {
                    eprintln!(
                        "slurmwatch: note: step {st} is not recorded; sstat's summary covers every running step"
                    );
                }
                if !matches!(self.mode, Mode::Json) {
                    eprintln!(
                        "slurmwatch: note: no live source for job {}: showing sstat's lifetime totals, not live readings",
                        e.display_id
                    );
                }
                let feed = Feed::sstat(e.job_id, summary);
                let node = facts.node.clone();
                // Never from a hop (the plan leaves sstat to the outer run).
                Some(output(
                    self.mode.clone(),
                    Feeds::single(node, feed),
                    facts,
                    self.queue.clone(),
                    self.args,
                    None,
                ))
            }
            Err(e) => {
                eprintln!("slurmwatch: note: no sstat summary either: {e}");
                None
            }
        }
    }
}

fn log_format(p: &Path) -> Result<LogFormat, Outcome> {
    match p.extension().and_then(|e| e.to_str()) {
        Some("jsonl") | Some("ndjson") => Ok(LogFormat::Jsonl),
        Some("csv") => Ok(LogFormat::Csv),
        _ => Err(usage(format!(
            "--log {}: the format follows the extension, and it is neither .jsonl nor .csv.",
            p.display()
        ))),
    }
}

#[derive(Clone, Copy)]
enum LogFormat {
    Jsonl,
    Csv,
}

/// The job as squeue sees it, for an id the user typed.
fn resolve(query: &str) -> Result<QueueEntry, Outcome> {
    match squeue::query_job(query) {
        Ok(entries) if entries.len() == 1 => Ok(entries.into_iter().next().expect("one entry")),
        Ok(entries) => find::pick(entries, &format!("Job {query} has several tasks")),
        Err(QueryError::Command(e)) => Err(find::no_slurm(&e)),
        Err(QueryError::UnknownJob(id)) => {
            // squeue forgets a job MinJobAge after it ends; the accounting still knows it.
            match sacct_state(&id) {
                Some(state) => Err(ended(&id, &state)),
                None => Err(unknown_job(&id, recorded_here(&id))),
            }
        }
        Err(e) => Err(Outcome::fail(
            2,
            sentence(&e),
            "Check that Slurm is up: squeue should answer.",
        )),
    }
}

/// squeue and sacct know no job `id`. On a cluster without accounting an ended job is
/// forgotten MinJobAge after it ends, yet its file may still be in this node's spool: then
/// the answer is that it has ended and `report` reads the file, not "no such job".
fn unknown_job(id: &str, file: Option<PathBuf>) -> Outcome {
    match file {
        Some(f) => Outcome::fail(
            1,
            format!(
                "job {id} is no longer in Slurm's queue and Slurm keeps no accounting here, but its recording is on this node ({}): it has ended, there is nothing live to show.",
                f.display()
            ),
            format!("slurmwatch report {id} shows what it did."),
        ),
        None => Outcome::fail(
            1,
            format!("Slurm knows no job {id}."),
            "Check the id with squeue --me (running and pending) or sacct (finished).",
        ),
    }
}

/// This node's spool file of job `id`, when it is there (a plain `<id>.sqlite`; a `%n`
/// spool is looked up for this host's short name).
fn recorded_here(id: &str) -> Option<PathBuf> {
    // A job by its own id only: an array task's or het component's file is named otherwise.
    let job_id = slurmwatch_core::slurm::job_id::JobId::own(id)?;
    let site = slurmwatch_core::site::Site::here();
    let node = site.node.clone().unwrap_or_default();
    let w = Wanted {
        job_id,
        nodes: std::slice::from_ref(&node),
        user: None,
        uid: None,
        other_nodes: false,
    };
    Locator::new(vec![site.spool_template().to_path_buf()])
        .node_files(&w, &node)
        .into_iter()
        .find(|p| p.is_file())
}

fn ended(id: &str, state: &str) -> Outcome {
    Outcome::fail(
        1,
        format!("job {id} has ended ({state}): there is nothing live to show."),
        format!("slurmwatch report {id} shows what it did."),
    )
}

/// The job's final state from accounting, when Slurm has one.
fn sacct_state(id: &str) -> Option<String> {
    let f = command::run(
        "sacct",
        &["-n", "-X", "-P", "-j", id, "-o", "State"],
        command::DEFAULT_TIMEOUT,
    )
    .ok()?;
    let state = f
        .stdout
        .lines()
        .next()?
        .split_whitespace()
        .next()?
        .to_string();
    (f.success && !state.is_empty()).then_some(state)
}

/// Only the job's owner (or root) watches a job: its file is the owner's alone.
fn check_owner(e: &QueueEntry) -> Result<(), Outcome> {
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    match e.uid {
        Some(uid) if uid != me && me != 0 => Err(Outcome::fail(
            1,
            format!(
                "job {} belongs to {}: slurmwatch shows only your own jobs.",
                e.display_id, e.user
            ),
            "Name one of your jobs (squeue --me lists them).",
        )),
        _ => Ok(()),
    }
}

fn fill_facts(f: &mut JobFacts, e: &QueueEntry) {
    f.job_name = Some(e.name.clone());
    f.user = Some(e.user.clone());
    f.node = e.first_node();
    // Per node: the file's own figures win; these fill in for direct readings.
    let nodes = e.node_count.unwrap_or(1).max(1);
    f.cores_allocated = e.cpus.map(|c| c / nodes);
    f.memory_allocated_bytes = e.memory_per_node_bytes;
    f.state = Some(if e.is_running() {
        JobState::Running
    } else {
        JobState::Ended
    });
}

/// The time budget from the last squeue answer, carried forward by the clock between polls.
#[derive(Default, Clone)]
struct QueueInfo {
    elapsed_seconds: Option<u64>,
    limit: Option<TimeLimit>,
    ends_at: Option<String>,
    asked: Option<Instant>,
}

impl QueueInfo {
    fn from_entry(e: &QueueEntry) -> QueueInfo {
        QueueInfo {
            elapsed_seconds: e.elapsed_seconds,
            limit: Some(e.limit),
            ends_at: e.end.clone(),
            asked: Some(Instant::now()),
        }
    }

    fn budget(&self, running: bool) -> TimeBudget {
        let Some(asked) = self.asked else {
            return TimeBudget::unknown("Slurm was not asked (file read on its own)");
        };
        let since = if running {
            asked.elapsed().as_secs()
        } else {
            0
        };
        TimeBudget {
            elapsed_seconds: Reading::from_option(self.elapsed_seconds.map(|e| e + since), || {
                "squeue gave no elapsed time".into()
            }),
            limit_seconds: match self.limit {
                Some(TimeLimit::Seconds(s)) => Reading::ok(s),
                Some(TimeLimit::Unlimited) => Reading::missing("unlimited"),
                _ => Reading::missing("squeue gave no time limit"),
            },
            ends_at: match (&self.ends_at, self.limit) {
                (_, Some(TimeLimit::Unlimited)) => Reading::missing("unlimited"),
                (Some(e), _) => Reading::ok(e.clone()),
                (None, _) => Reading::missing("squeue gave no end time"),
            },
        }
    }
}

/// The job's nodes (squeue's list expanded), or just `only` when it is one of them.
fn job_nodes(e: &QueueEntry, only: Option<&str>) -> Vec<String> {
    let mut nodes: Vec<String> = hostlist::expand(&e.nodes).unwrap_or_default();
    if nodes.is_empty() {
        nodes.extend(e.first_node());
    }
    if let Some(o) = only {
        nodes.retain(|n| n == o);
    }
    nodes
}

/// Runs one hop per node of `missing` (indices into `per_node`), all at once, and puts each
/// answer (that node's own snapshot) in its place; a failed hop leaves the node not
/// reporting, with why.
fn hop_missing_nodes(
    e: &QueueEntry,
    per_node: &mut [(String, Result<Feed, String>)],
    missing: &[usize],
) {
    let missing: Vec<(usize, String)> = missing
        .iter()
        .map(|&i| (i, per_node[i].0.clone()))
        .collect();
    let answers: Vec<(usize, Result<Snapshot, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = missing
            .iter()
            .map(|(i, node)| (*i, s.spawn(move || hop_snapshot(e, node))))
            .collect();
        handles
            .into_iter()
            .map(|(i, h)| {
                let answer = h
                    .join()
                    .unwrap_or_else(|_| Err("the hop's thread failed".into()));
                (i, answer)
            })
            .collect()
    });
    for (i, answer) in answers {
        per_node[i].1 = answer.map(Feed::fixed);
    }
}

/// One node's snapshot through `srun --overlap` on that node: the inner run reads that
/// node's file (or its cgroup) and sends the snapshot back as the library's JSON.
fn hop_snapshot(e: &QueueEntry, node: &str) -> Result<Snapshot, String> {
    let exe = std::env::current_exe()
        .map_err(|err| format!("no srun hop: cannot find my own executable: {err}"))?;
    let mut cmd = srun_hop_command(e, node, false);
    cmd.arg(&exe).arg(e.job_id.to_string()).args([
        "--once",
        "--json",
        "--raw-snapshot",
        "--node",
        node,
    ]);
    let f = command::run_command(cmd, HOP_TIMEOUT, Some(Duration::from_secs(3)))
        .map_err(|err| format!("no srun hop to {node}: {err}"))?;
    serde_json::from_str(f.stdout.trim()).map_err(|_| {
        let why = f
            .stderr
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("no answer");
        format!("the srun hop to {node} failed: {why}")
    })
}

/// Per node of the job: its files where `slurmwatch_core::locate` says, the node-local spool
/// (`%n` expanded) before the archive copy (`<job>.<node>.sqlite`).
fn candidate_files(e: &QueueEntry) -> Vec<(String, Vec<PathBuf>)> {
    let job_id = e.job_id;
    let nodes = job_nodes(e, None);
    let w = Wanted {
        job_id,
        nodes: &nodes,
        user: Some(&e.user),
        uid: e.uid,
        other_nodes: false,
    };
    let mut locator = Locator::site(None, &[]);
    if nodes.is_empty() {
        // No node known (yet): only a file named without a node, the plain spool's.
        return vec![(String::new(), locator.node_files(&w, ""))];
    }
    nodes
        .iter()
        .map(|node| (node.clone(), locator.node_files(&w, node)))
        .collect()
}

/// `srun --overlap` into job `e` on `node` (the program and its arguments follow). srun hands
/// its environment to the step: the caller's own job's SLURM_* settings (from inside another
/// allocation they would size this step) and the source choice are dropped, and the inner
/// run is marked.
fn srun_hop_command(e: &QueueEntry, node: &str, pty: bool) -> std::process::Command {
    let mut cmd = std::process::Command::new("srun");
    cmd.arg(format!("--jobid={}", e.job_id))
        .args([
            "--overlap",
            "-N1",
            "-n1",
            "--quiet",
            "--job-name=slurmwatch",
        ])
        .arg(format!("--nodelist={node}"));
    if pty {
        cmd.arg("--pty");
    }
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if (k.starts_with("SLURM_") && k != "SLURM_CONF") || k == SOURCE_ENV {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd.env(HOP_ENV, "1");
    cmd
}

/// Runs this same command on the job's node inside the job (`srun --overlap`), where the
/// file or the cgroup is; the inner run marks its output `srun_hop`.
///
/// `Ok(code)`: the inner run answered (its output is passed on). `Err(why)`: the hop could
/// not be made or failed before the inner run answered, so the caller may fall back to sstat.
/// `--once` is bounded by [`HOP_TIMEOUT`]; the dashboard and `--log` run as long as they run.
fn hop(e: &QueueEntry, node: &str, mode: &Mode) -> Result<i32, String> {
    let exe = std::env::current_exe()
        .map_err(|err| format!("no srun hop: cannot find my own executable: {err}"))?;
    if matches!(mode, Mode::Screen) {
        eprintln!(
            "slurmwatch: job {} has no recording here; running on {node} through srun --overlap",
            e.display_id
        );
    }
    let mut cmd = srun_hop_command(e, node, matches!(mode, Mode::Screen));
    cmd.arg(&exe).args(std::env::args_os().skip(1));
    if matches!(mode, Mode::Screen | Mode::Log(_)) {
        return match cmd.status() {
            Ok(s) => Ok(s.code().unwrap_or(1)),
            Err(err) => Err(format!("no srun hop to {node}: cannot run srun: {err}")),
        };
    }
    let f = command::run_command(cmd, HOP_TIMEOUT, Some(Duration::from_secs(3)))
        .map_err(|err| format!("no srun hop to {node}: {err}"))?;
    // The inner run's own answer (a snapshot, or "nothing live" with exit 1) is passed on;
    // anything else (srun refused, the inner run found nothing there) is a failed hop.
    let inner_spoke = f.stderr.lines().any(|l| l.starts_with("slurmwatch: "));
    if f.success || (f.code == Some(1) && inner_spoke) {
        let _ = std::io::stderr().write_all(f.stderr.as_bytes());
        return match print(&f.stdout) {
            Ok(_) => Ok(f.code.unwrap_or(1)),
            Err(o) => Ok(o.code),
        };
    }
    let why = f
        .stderr
        .lines()
        .map(str::trim)
        .rfind(|l| l.starts_with("srun: error:") || l.starts_with("slurmwatch: "))
        .or_else(|| f.stderr.lines().map(str::trim).rfind(|l| !l.is_empty()))
        .map_or_else(|| format!("exit status {:?}", f.code), str::to_string);
    Err(format!("the srun hop to {node} failed: {why}"))
}

/// A snapshot of the feed with Slurm's facts.
fn take(
    feeds: &Feeds,
    facts: &JobFacts,
    queue: &QueueInfo,
    hop: Option<SnapshotSource>,
    selected: Option<usize>,
) -> Snapshot {
    finish(feeds.snapshot(facts, selected), queue, hop)
}

/// [`take`] as of every stored row newer than `after_ms` (at most `max`), oldest first;
/// `None` for feeds with one reading per look (see `Feeds::snapshots_after`).
fn take_rows(
    feeds: &Feeds,
    facts: &JobFacts,
    queue: &QueueInfo,
    hop: Option<SnapshotSource>,
    after_ms: Option<i64>,
    max: usize,
) -> Option<Vec<Snapshot>> {
    let rows = feeds.snapshots_after(facts, after_ms, max)?;
    Some(rows.into_iter().map(|s| finish(s, queue, hop)).collect())
}

/// Slurm's time budget (as of now) and the hop's source on a snapshot.
fn finish(mut s: Snapshot, queue: &QueueInfo, hop: Option<SnapshotSource>) -> Snapshot {
    s.time = queue.budget(s.state == JobState::Running);
    if let Some(h) = hop {
        s.source = h;
    }
    s
}

/// Writes to stdout; a closed pipe (`| head`) is a clean end, not an error.
fn print(text: &str) -> Result<i32, Outcome> {
    crate::output::print(text).map_err(|e| Outcome::fail(2, e, ""))?;
    Ok(0)
}

fn output(
    mode: Mode,
    mut feed: Feeds,
    facts: JobFacts,
    queue: QueueInfo,
    args: &WatchArgs,
    hop: Option<SnapshotSource>,
) -> Result<i32, Outcome> {
    let read_err = |e: String| {
        Outcome::fail(
            2,
            sentence(&e),
            "The file may still be being created; try again in a few seconds.",
        )
    };
    // The throughput is the dashboard's and the JSON's (CSV has no column for it; a log's
    // lines leave it to them).
    if matches!(mode, Mode::Json | Mode::Screen) {
        feed.follow_log();
    }
    match mode {
        Mode::Json | Mode::Csv => {
            feed.refresh().map_err(read_err)?;
            feed.settle(Duration::from_millis(500)).map_err(read_err)?;
            let s = take(&feed, &facts, &queue, hop, None);
            let text = if args.raw_snapshot {
                format!("{}\n", serde_json::to_string(&s).unwrap_or_default())
            } else if matches!(mode, Mode::Json) {
                format!("{}\n", json::to_line(&s))
            } else {
                format!("{}\n{}\n", csv::header(&s), csv::row(&s))
            };
            print(&text)
        }
        Mode::Log(path) => {
            let format = log_format(&path)?;
            live::log(&path, format, args, feed, facts, queue, hop)
        }
        Mode::Screen => live::screen(args, feed, facts, queue, hop),
    }
}

#[cfg(test)]
mod unknown_job_tests {
    use super::unknown_job;
    use std::path::PathBuf;

    /// Seen on Slurm 24.11 without accounting: an ended job's file was still in the spool, yet
    /// the answer was "Slurm knows no job N".
    #[test]
    fn an_ended_job_with_its_file_here_points_at_report() {
        let o = unknown_job("7", Some(PathBuf::from("/var/spool/slurmwatch/7.sqlite")));
        let (what, hint) = o.message.expect("a message");
        assert!(
            what.contains("has ended") && what.contains("/var/spool/slurmwatch/7.sqlite"),
            "{what}"
        );
        assert_eq!(hint, "slurmwatch report 7 shows what it did.");
        assert_eq!(o.code, 1);
        let (what, _) = unknown_job("7", None).message.unwrap();
        assert_eq!(what, "Slurm knows no job 7.");
    }
}

#[cfg(test)]
mod cascade_tests {
    use super::*;
    use slurmwatch_core::sample::Source;
    use SnapshotSource as S;

    fn nodes(read_files: bool, hop_missing: bool) -> Stage {
        Stage::Nodes {
            read_files,
            hop_missing,
        }
    }

    /// Unforced: every source in order; the per-node hops only for one snapshot.
    #[test]
    fn the_cascade_tries_every_source_in_order() {
        assert_eq!(
            plan(None, false, true),
            [
                nodes(true, true),
                Stage::Direct,
                Stage::JobHop,
                Stage::SstatSummary
            ]
        );
        assert_eq!(
            plan(None, false, false),
            [
                nodes(true, false),
                Stage::Direct,
                Stage::JobHop,
                Stage::SstatSummary
            ]
        );
    }

    /// The inner run of a hop reads only what is on its node: its file or its processes.
    #[test]
    fn a_hop_never_hops_again_nor_asks_sstat() {
        for one_shot in [true, false] {
            assert_eq!(
                plan(None, true, one_shot),
                [nodes(true, false), Stage::Direct]
            );
        }
    }

    #[test]
    fn a_forced_source_is_the_only_stage() {
        assert_eq!(plan(Some(S::PluginFile), false, true), [nodes(true, false)]);
        assert_eq!(plan(Some(S::Direct), false, true), [Stage::Direct]);
        assert_eq!(
            plan(Some(S::SstatSummary), false, false),
            [Stage::SstatSummary]
        );
        // srun hops: per node for one snapshot (no file read), else the whole-job hop.
        assert_eq!(
            plan(Some(S::SrunHop), false, true),
            [nodes(false, true), Stage::JobHop]
        );
        assert_eq!(plan(Some(S::SrunHop), false, false), [Stage::JobHop]);
    }

    fn meta(job_id: u64, node: &str) -> JobMeta {
        JobMeta {
            job_id,
            user: "alice".into(),
            uid: 1000,
            node: node.into(),
            cluster: None,
            plugin_version: "0".into(),
            interval_seconds: 1,
            source: Source::CgroupV2,
            cores_allocated: None,
            memory_allocated_bytes: None,
            started_unix_ms: 0,
            incarnation: None,
        }
    }

    #[test]
    fn a_file_is_taken_only_for_its_job_and_on_a_multinode_job_its_node() {
        assert_eq!(
            file_verdict(&meta(7, "n1"), 7, "n1", true),
            FileVerdict::Take
        );
        assert_eq!(
            file_verdict(&meta(8, "n1"), 7, "n1", false),
            FileVerdict::OtherJob
        );
        assert_eq!(
            file_verdict(&meta(7, "n2"), 7, "n1", true),
            FileVerdict::OtherNode
        );
        // One node: the file is the job's wherever it says it was written.
        assert_eq!(
            file_verdict(&meta(7, "n2"), 7, "n1", false),
            FileVerdict::Take
        );
    }

    #[test]
    fn only_a_multinode_jobs_missing_nodes_are_hopped() {
        assert_eq!(nodes_to_hop(&[]), Vec::<usize>::new());
        assert_eq!(nodes_to_hop(&[false]), Vec::<usize>::new());
        assert_eq!(nodes_to_hop(&[true, true]), Vec::<usize>::new());
        assert_eq!(nodes_to_hop(&[true, false, true, false]), [1, 3]);
        assert_eq!(nodes_to_hop(&[false, false]), [0, 1]);
    }

    fn entry(nodes: &str) -> QueueEntry {
        QueueEntry {
            display_id: "12_3".into(),
            job_id: 15,
            state: "RUNNING".into(),
            user: "alice".into(),
            uid: Some(1000),
            elapsed_seconds: None,
            limit: TimeLimit::Unknown,
            start: None,
            end: None,
            nodes: nodes.into(),
            reason: String::new(),
            cpus: None,
            memory_per_node_bytes: None,
            node_count: None,
            name: "x".into(),
        }
    }

    #[test]
    fn no_source_names_the_forced_one_or_where_to_run() {
        let o = no_source(&entry("sw[1-2]"), Some(S::SstatSummary));
        assert_eq!(o.code, 2);
        let (what, hint) = o.message.unwrap();
        assert_eq!(
            what,
            "job 12_3 cannot be read from the source SLURMWATCH_SOURCE asks for (sstat_summary)."
        );
        assert_eq!(hint, "Unset SLURMWATCH_SOURCE to let slurmwatch choose.");
        let (what, hint) = no_source(&entry("sw[1-2]"), None).message.unwrap();
        assert_eq!(
            what,
            "job 12_3 is running but this machine has neither its recording nor its processes."
        );
        assert_eq!(
            hint,
            "Run slurmwatch on sw[1-2] (srun --jobid=15 --overlap --pty slurmwatch 12_3), or record the job with #SBATCH --slurmwatch."
        );
        let (_, hint) = no_source(&entry(""), None).message.unwrap();
        assert!(
            hint.starts_with("Run slurmwatch on the job's node "),
            "{hint}"
        );
    }
}
