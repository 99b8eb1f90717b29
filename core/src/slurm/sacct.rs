//! `sacct`: what Slurm's accounting recorded about a job and its steps.
//!
//! The traps this module exists for (docs/design.md §4), each handled where it is parsed:
//! - the output format is pinned: `SLURM_TIME_FORMAT=standard` and `LC_ALL=C` (a user's
//!   `SLURM_TIME_FORMAT=relative` or a locale would rewrite every timestamp), and the header
//!   line is kept so columns are found by name, never by position;
//! - `--parsable2` with a delimiter drawn at random for each call (`\x1f`, 16 hex digits,
//!   `\x1f`): a job name, work dir, SubmitLine or comment may hold `|`, `\x1f` and newlines
//!   (Slurm keeps them all), so nothing a user could type may separate fields; every such
//!   field lies between the first and last columns, two job ids, so a record is exactly the
//!   header's count of fields and a newline inside a field stays there (`records`). A sacct
//!   that refuses `--delimiter` is an error, not a fallback to `|`;
//! - `ReqMem` `0n` means "all of each node's memory", never zero; `Mn`/`Mc` suffixes are per
//!   node / per CPU (before 21.08), `ReqMem` without a suffix is per node;
//! - `AllocTRES` `mem=` is the allocation total over all nodes (per node = total / nodes);
//! - `MaxRSS` and a meaningful `TotalCPU` exist only on step lines (`.batch`, `.N`); a job
//!   with no step lines (its steps purged, or none ever started) falls back to the job
//!   line's `TotalCPU`, labelled as such;
//! - `MaxRSS` is the largest *single task's* peak: a step of N tasks on a node used up to the
//!   sum of its tasks, which `TRESUsageInTot` `mem=` gives on one node (over several nodes
//!   22.05.8 printed one node's sum: see [`StepMemoryBasis`]);
//! - a `RUNNING` record with `End=Unknown` may outlive the job (a lost end record): callers
//!   check squeue or the recording before believing the elapsed time;
//! - GPUs are spelled `gres/gpu=4`, `gres/gpu:a100=4` (usually beside the untyped one) or, before
//!   20.11, `AllocGRES=gpu:4`;
//! - `Reserved` was renamed `Planned` in 23.02, and 22.05 refuses `Planned`: neither is asked
//!   (each costs a second slurmdbd round trip on one release or the other); the time from
//!   eligible to start is computed from `Eligible` and `Start`, which every release has. Any
//!   other field a release calls invalid is swapped for its other name (or dropped) and the
//!   query retried, as a fallback;
//! - one query answers the whole report: `SubmitLine` (where the job's output went) and
//!   `AdminComment` (slurmwatch's summary) ride along;
//! - `sacct` missing, hanging (slurmdbd down: it can wait for minutes) or failing gets one
//!   sentence, after a bounded wait.
//!
//! The module's parts: `fields` reads one value (a state, a TRES list, `ReqMem`, a
//! timestamp); `line` is what a line and a record mean (typed from the columns, memory and
//! CPU bases); `records` cuts an answer into its header and records; `parse` turns an
//! answer's text into jobs; `query` runs sacct (the field list, retries, windows).
//! `columns`, `group`, `pipeline`, `stream` and `times` serve them.

mod columns;
mod fields;
mod group;
mod line;
mod parse;
mod pipeline;
mod query;
pub(crate) mod records;
mod stream;
mod times;

pub use columns::Kept;
pub use fields::{parse_gres_gpus, parse_time, tres_usage, ExitCode, ReqMem, State, Tres};
pub use group::Tally;
pub use line::{CpuBasis, JobAccounting, Line, StepMemory, StepMemoryBasis};
pub use parse::{parse, parse_many, Batch};
pub use query::{sacct_time, Query, Window, DEFAULT_TIMEOUT, FIELDS, WINDOW_CHUNK_SECONDS};

/// The raw values a window query keeps per line ([`Kept::Ids`]); everything else a window
/// needs must be a typed member of [`Line`], read from the column when the line is typed.
pub const WINDOW_KEPT_FIELDS: &[&str] = &["JobIDRaw"];

/// The unit separator: the delimiter of the captured answers in the tests and of the generated
/// histories ([`history::fixture`](crate::history)), whose fields hold no user's text. Queries
/// never use it alone: a job name may hold it (see [`Query`]).
pub const DELIMITER: &str = "\u{1f}";

/// Why sacct could not answer. Each `Display` is one sentence for the user.
#[derive(Debug, thiserror::Error)]
pub enum SacctError {
    #[error("sacct is not installed here ({0}); run the report on a node with Slurm's client commands, or give --file and --no-sacct")]
    Missing(String),
    #[error("sacct did not answer within {0} s (is slurmdbd up?); try again, or use --no-sacct")]
    TimedOut(u64),
    #[error("sacct failed: {0}")]
    Failed(String),
    #[error("sacct knows no job {0} (wrong id, another cluster, or purged from accounting)")]
    UnknownJob(String),
}
