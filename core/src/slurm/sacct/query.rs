//! Running sacct: the field list, the bounded call and its retries (a renamed field), one
//! job, many jobs, and time windows streamed in chunks. Each call asks a fresh delimiter
//! ([`Delimiter::fresh`]): see [`records`](super::records) for why.

use std::collections::hash_map::Entry;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::columns::Kept;
use super::group::Tally;
use super::pipeline::{self, Feed};
use super::records::Delimiter;
use super::stream::{self, Budget};
use super::{parse, parse_many, Batch, JobAccounting, SacctError};
use crate::slurm::job_id::JobId;

/// The fields asked for, in this order. Each is looked up by name in the header. The first
/// and the last are job ids, which hold no newline: every field a user or another tool
/// writes (JobName, WorkDir, SubmitLine, AdminComment) lies between them, so a newline
/// typed into one cannot end a record (see [`records`](super::records)).
pub const FIELDS: &[&str] = &[
    "JobID",
    "JobName",
    "User",
    "UID",
    "Group",
    "Account",
    "Partition",
    "Cluster",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Reason",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "Elapsed",
    "ElapsedRaw",
    "Timelimit",
    "TimelimitRaw",
    "NNodes",
    "NCPUS",
    "ReqCPUS",
    "AllocCPUS",
    "ReqMem",
    "ReqTRES",
    "AllocTRES",
    "NTasks",
    "NodeList",
    "TotalCPU",
    "UserCPU",
    "SystemCPU",
    "MaxRSS",
    "TRESUsageInTot",
    "TRESUsageInMax",
    "MaxRSSNode",
    "MaxRSSTask",
    "AveRSS",
    "MaxVMSize",
    "MaxDiskRead",
    "MaxDiskWrite",
    "WorkDir",
    "SubmitLine",
    // An AdminComment another tool wrote may hold anything; ours is base64 (jobstats'
    // `JS1:`) or base32 (older `SW1:`) (analysis::admin_comment).
    "AdminComment",
    "JobIDRaw",
];

/// The columns [`FIELDS`] may start and end with: never a newline in them.
const FIXED_ENDS: &[&str] = &["JobID", "JobIDRaw"];

/// Fields known under two names across Slurm releases (newer, older). Neither of these is in
/// [`FIELDS`] (see the module doc); the table is the fallback for a list that names one.
const RENAMED: &[(&str, &str)] = &[("Planned", "Reserved")];

/// How long `sacct` may take before the report gives up on it (slurmdbd down makes it hang).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// How to run sacct.
#[derive(Debug, Clone)]
pub struct Query {
    /// The program: `sacct` on PATH unless `SLURMWATCH_SACCT` names another (tests use a fake).
    pub program: PathBuf,
    pub timeout: Duration,
    /// [`window`](Self::window) asks at most this much time per sacct call.
    pub chunk_seconds: i64,
}

impl Default for Query {
    fn default() -> Self {
        Query {
            program: std::env::var_os("SLURMWATCH_SACCT")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("sacct")),
            timeout: DEFAULT_TIMEOUT,
            chunk_seconds: WINDOW_CHUNK_SECONDS,
        }
    }
}

impl Query {
    /// The job's record. `job` must be a job id (`12345`, `12345_3`); checked here since it
    /// goes on a command line.
    pub fn job(&self, job: &str) -> Result<JobAccounting, SacctError> {
        check_job_id(job)?;
        let (text, delimiter) =
            self.run_fields(&["-j".to_string(), job.to_string()], self.timeout)?;
        parse(&text, delimiter.as_str()).ok_or_else(|| SacctError::UnknownJob(job.to_string()))
    }

    /// Many jobs in one sacct call (`-j a,b,c`), each with its steps: what `slurmwatch jobs`
    /// asks, so a table of a thousand jobs costs one slurmdbd round trip, not a thousand.
    /// A plain id of an array job (`123`) answers all its tasks. Ids are checked here (they
    /// go on a command line); the same job answered twice (`123` and `123_4`) is kept once.
    pub fn jobs(&self, ids: &[String]) -> Result<Batch, SacctError> {
        if ids.is_empty() {
            return Ok(Batch::default());
        }
        for id in ids {
            check_job_id(id)?;
        }
        let (text, delimiter) =
            self.run_fields(&["-j".to_string(), ids.join(",")], self.timeout)?;
        let b = parse_many(&text, delimiter.as_str());
        // A job answered twice keeps its later copy: parse_many files the steps under it.
        let mut out = Batch {
            skipped_lines: b.skipped_lines,
            orphan_steps: b.orphan_steps,
            records: Vec::new(),
        };
        let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for r in b.records {
            let key = r.key().to_string();
            match seen.get(&key) {
                Some(&i) => out.records[i] = r,
                None => {
                    seen.insert(key, out.records.len());
                    out.records.push(r);
                }
            }
        }
        Ok(out)
    }

    /// Every job of a time window, with its steps: one bounded-time query, cut into chunks of
    /// at most `chunk_seconds` ([`WINDOW_CHUNK_SECONDS`] by default) so a long window never
    /// asks slurmdbd for months at once. A job running across a chunk boundary is listed by
    /// both chunks: it is kept once (the later answer, which has the more complete record).
    /// Holds every record: for a window of many jobs, [`window_each`](Self::window_each).
    pub fn window(&self, w: &Window) -> Result<Batch, SacctError> {
        let mut out = Batch::default();
        let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let tally = self.window_each(
            w,
            Kept::All,
            &mut |r| match seen.entry(r.key().to_string()) {
                Entry::Occupied(i) => out.records[*i.get()] = r.clone(),
                Entry::Vacant(v) => {
                    v.insert(out.records.len());
                    out.records.push(r.clone());
                }
            },
        )?;
        out.skipped_lines = tally.skipped_lines;
        out.orphan_steps = tally.orphan_steps;
        Ok(out)
    }

    /// [`window`](Self::window) without holding it: each job is handed to `on_job` as soon as
    /// sacct has printed its last step, and nothing of sacct's text is kept (memory does not
    /// grow with the answer). A job listed by two chunks is handed on twice, the later the
    /// more complete: the consumer keeps one per [`JobAccounting::key`]. `self.timeout` bounds the
    /// time spent *waiting on sacct* over the whole window (every call, every retry); what
    /// `on_job` takes is not sacct's time and does not count. Lines reach `on_job` before
    /// sacct has exited: when a call then fails, the query fails, and what was handed on is
    /// the caller's to drop.
    pub fn window_each(
        &self,
        w: &Window,
        kept: Kept,
        on_job: &mut dyn FnMut(&JobAccounting),
    ) -> Result<Tally, SacctError> {
        self.window_each_prepared::<()>(w, kept, None, &mut |r, _| on_job(r))
    }

    /// [`window_each`](Self::window_each), each job handed on with what `prepare` made of it
    /// on a thread of its own (`Some` when `prepare` is given): work per job that needs
    /// nothing of the other jobs, taken off the caller's thread.
    pub fn window_each_prepared<T: Copy + Send>(
        &self,
        w: &Window,
        kept: Kept,
        prepare: Option<&(dyn Fn(&JobAccounting) -> T + Sync)>,
        on_job: &mut dyn FnMut(&JobAccounting, Option<T>),
    ) -> Result<Tally, SacctError> {
        if w.until_unix <= w.since_unix {
            return Err(SacctError::Failed(
                "the window is empty: --until must be later than --since".into(),
            ));
        }
        for u in &w.users {
            if u.is_empty()
                || !u
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-$".contains(c))
            {
                return Err(SacctError::Failed(format!("{u:?} is not a user name")));
            }
        }
        if let Some(p) = &w.partition {
            if p.is_empty()
                || !p
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-,".contains(c))
            {
                return Err(SacctError::Failed(format!("{p:?} is not a partition name")));
            }
        }
        // Parsed on threads of their own (see `pipeline`): the caller's work on each job
        // overlaps the parsing of the next ones.
        pipeline::window_jobs(kept, |feed| self.window_lines(w, feed), prepare, on_job)
    }

    /// [`window_each`](Self::window_each)'s chunks, each answer's lines written to `feed`.
    fn window_lines(&self, w: &Window, feed: &mut Feed) -> Result<(), SacctError> {
        let mut budget = Budget::new(self.timeout);
        let mut from = w.since_unix;
        while from < w.until_unix {
            let to = (from + self.chunk_seconds.max(3600)).min(w.until_unix);
            let mut sel = vec![
                "-S".to_string(),
                sacct_time(from),
                "-E".to_string(),
                sacct_time(to),
            ];
            if w.all_users {
                sel.push("--allusers".into());
            } else if !w.users.is_empty() {
                sel.push("-u".into());
                sel.push(w.users.join(","));
            }
            if let Some(p) = &w.partition {
                sel.push("-r".into());
                sel.push(p.clone());
            }
            self.run_fields_each(&sel, &mut budget, feed)?;
            from = to;
        }
        Ok(())
    }

    /// Runs sacct with `selector` (the job or window arguments) and the field list, retrying
    /// once for each field this release calls invalid (renamed or dropped). Returns the text
    /// and the delimiter it was asked with.
    fn run_fields(
        &self,
        selector: &[String],
        timeout: Duration,
    ) -> Result<(String, Delimiter), SacctError> {
        let mut fields: Vec<String> = FIELDS.iter().map(|s| s.to_string()).collect();
        let deadline = Instant::now() + timeout;
        for _ in 0..4 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SacctError::TimedOut(timeout.as_secs().max(1)));
            }
            let delimiter = Delimiter::fresh();
            let args = field_args(selector, &fields, &delimiter);
            let out = run_bounded(&self.program, &args, left)?;
            if out.status_ok {
                return Ok((out.stdout, delimiter));
            }
            retry_with(&mut fields, out.stderr.trim())?;
        }
        Err(SacctError::Failed(
            "sacct refused every field list tried".into(),
        ))
    }

    /// [`run_fields`](Self::run_fields) streamed: the answer goes to `feed` as it comes,
    /// within `budget`, and is ended there when sacct exits well. A call that fails after
    /// `feed` handed something on is not retried (it has been handed on): the query fails.
    fn run_fields_each(
        &self,
        selector: &[String],
        budget: &mut Budget,
        feed: &mut Feed,
    ) -> Result<(), SacctError> {
        let mut fields: Vec<String> = FIELDS.iter().map(|s| s.to_string()).collect();
        for _ in 0..4 {
            let delimiter = Delimiter::fresh();
            let args = field_args(selector, &fields, &delimiter);
            feed.begin(delimiter.as_str());
            let out = stream::run_chunks(&self.program, &args, budget, &mut |c| feed.bytes(c))?;
            if out.status_ok {
                feed.end_answer();
                return Ok(());
            }
            if feed.handed_on() {
                return Err(SacctError::Failed(first_line(out.stderr.trim())));
            }
            retry_with(&mut fields, out.stderr.trim())?;
        }
        Err(SacctError::Failed(
            "sacct refused every field list tried".into(),
        ))
    }
}

/// A job id as it may go on sacct's command line: a job, an array task (`_`) or a het
/// component (`+`), as `slurm::job_id` parses them.
fn check_job_id(id: &str) -> Result<(), SacctError> {
    match JobId::parse(id) {
        Ok(_) => Ok(()),
        Err(_) => Err(SacctError::Failed(format!("{id:?} is not a job id"))),
    }
}

/// sacct's arguments: the selector, then the fields and the delimiter asked for.
fn field_args(selector: &[String], fields: &[String], delimiter: &Delimiter) -> Vec<String> {
    let mut args: Vec<String> = selector.to_vec();
    args.extend([
        "--parsable2".into(),
        "-o".into(),
        fields.join(","),
        format!("--delimiter={}", delimiter.as_str()),
    ]);
    args
}

/// After a refused call: the field this release calls invalid swapped for its other name (or
/// dropped; never a first or last column, which every release has); the error when that
/// does not explain `err`. A refused `--delimiter` is an error: without a delimiter no user
/// can type, sacct's text cannot be read safely.
fn retry_with(fields: &mut Vec<String>, err: &str) -> Result<(), SacctError> {
    let Some(bad) = invalid_field(err) else {
        return Err(SacctError::Failed(first_line(err)));
    };
    let Some(pos) = fields.iter().position(|f| f.eq_ignore_ascii_case(&bad)) else {
        return Err(SacctError::Failed(first_line(err)));
    };
    if FIXED_ENDS.iter().any(|f| f.eq_ignore_ascii_case(&bad)) {
        return Err(SacctError::Failed(first_line(err)));
    }
    let alt = RENAMED.iter().find_map(|(a, b)| {
        if a.eq_ignore_ascii_case(&bad) {
            Some(*b)
        } else if b.eq_ignore_ascii_case(&bad) {
            Some(*a)
        } else {
            None
        }
    });
    match alt {
        Some(a) if !fields.iter().any(|f| f == a) => fields[pos] = a.to_string(),
        _ => {
            fields.remove(pos);
        }
    }
    Ok(())
}

/// The longest stretch one sacct call is asked for in a window query.
pub const WINDOW_CHUNK_SECONDS: i64 = 7 * 86400;

/// A multi-job query: the jobs of `users` (or of everyone, or of the caller when neither is
/// given) that ran between `since_unix` and `until_unix`, optionally in one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    pub since_unix: i64,
    pub until_unix: i64,
    pub users: Vec<String>,
    pub all_users: bool,
    pub partition: Option<String>,
}

/// Unix seconds as sacct's `-S/-E` want them: local `YYYY-MM-DDTHH:MM:SS` (the `standard`
/// format [`parse_time`](super::parse_time) reads back).
pub fn sacct_time(unix: i64) -> String {
    crate::sys::local_time(unix).map_or_else(|| "now".into(), |t| t.date_time('T'))
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    if l.is_empty() {
        "it exited with an error and printed nothing".into()
    } else {
        l.chars().take(300).collect()
    }
}

/// `sacct: error: Invalid field requested: "Planned"` → `Planned`.
fn invalid_field(stderr: &str) -> Option<String> {
    let l = stderr
        .lines()
        .find(|l| l.contains("Invalid field requested"))?;
    let rest = l.split("Invalid field requested").nth(1)?;
    let name: String = rest
        .trim_start_matches([':', ' '])
        .trim_matches(|c: char| c == '"' || c == '\'' || c.is_whitespace())
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

struct Output {
    status_ok: bool,
    stdout: String,
    stderr: String,
}

/// sacct through [`command::run_command`](crate::slurm::command::run_command) with the TCP shim
/// preloaded ([`quickack`](crate::slurm::quickack)) (pinned time format and locale, bounded wait, killed at the deadline; the child's exit is waited for, not polled,
/// so the answer is read the moment sacct exits), without a user's `SACCT_FORMAT`.
fn run_bounded(
    program: &PathBuf,
    args: &[String],
    timeout: Duration,
) -> Result<Output, SacctError> {
    use crate::slurm::command::{run_command, CommandError};
    let mut cmd = Command::new(program);
    cmd.args(args).env_remove("SACCT_FORMAT");
    crate::slurm::quickack::preload_into(&mut cmd);
    match run_command(cmd, timeout, None) {
        Ok(f) => Ok(Output {
            status_ok: f.success,
            stdout: f.stdout,
            stderr: f.stderr,
        }),
        Err(CommandError::NotFound { .. }) => Err(SacctError::Missing(format!(
            "{} not found",
            program.display()
        ))),
        Err(CommandError::Spawn { message, .. }) => Err(SacctError::Missing(format!(
            "cannot run {}: {message}",
            program.display()
        ))),
        Err(CommandError::Timeout { .. }) => Err(SacctError::TimedOut(timeout.as_secs().max(1))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule [`records`](super::super::records) rests on.
    #[test]
    fn every_free_text_field_lies_between_two_job_ids() {
        assert_eq!(FIELDS.first(), Some(&"JobID"));
        assert_eq!(FIELDS.last(), Some(&"JobIDRaw"));
        assert!(FIXED_ENDS.contains(FIELDS.first().unwrap()));
        assert!(FIXED_ENDS.contains(FIELDS.last().unwrap()));
        // A release that refused one of them is not asked again without it.
        let mut f: Vec<String> = FIELDS.iter().map(|s| s.to_string()).collect();
        for end in FIXED_ENDS {
            let err = format!("sacct: error: Invalid field requested: \"{end}\"");
            assert!(retry_with(&mut f, &err).is_err());
        }
        assert!(retry_with(&mut f, "sacct: error: Invalid field requested: \"WorkDir\"").is_ok());
        assert_eq!(f.first().map(String::as_str), FIELDS.first().copied());
        assert_eq!(f.last().map(String::as_str), FIELDS.last().copied());
        assert!(!f.iter().any(|x| x == "WorkDir"));
    }

    #[test]
    fn only_job_ids_go_on_the_command_line() {
        for ok in ["12345", "12345_7", "12345+1"] {
            assert!(check_job_id(ok).is_ok(), "{ok}");
        }
        // Taken before by a check of characters only; none names one job.
        for bad in [
            "",
            "_",
            "+",
            "1__2",
            "1_+2",
            "12345678901",
            "4294967296",
            "012",
            "1.0",
        ] {
            assert!(check_job_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn invalid_field_is_found() {
        assert_eq!(
            invalid_field("sacct: error: Invalid field requested: \"Planned\"\n"),
            Some("Planned".into())
        );
        assert_eq!(invalid_field("other"), None);
    }
}
