//! `slurmwatch jobs`: one line per job for many jobs at once (reportseff's table), from one
//! sacct query for the whole set and each job's recording or slurmdbd summary where there is
//! one. The figures are the report's own (`report::build` → `analysis::efficiency`): a row
//! never says something the job's report would contradict.
//!
//! - [`select`]: what the user named (job ids, array ids, Slurm output file names,
//!   directories of them) → the ids sacct is asked for;
//! - [`row`]: one job's row from its sacct record and its report;
//! - [`columns`]: the columns, `--format`, and the text / CSV / parsable / JSON renderings;
//! - [`array`]: an array's rows summarised into one.

pub mod array;
pub mod columns;
pub mod row;
pub mod select;

/// The `schema` of `slurmwatch jobs --json` (docs/reference/json.md).
pub const SCHEMA: u32 = 1;
