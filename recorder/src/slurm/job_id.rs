//! Slurm's job ids, written once: the one type ([`JobId`]), its one parser ([`JobId::parse`])
//! and the one rule for a job's own id ([`raw_id`]). Every place that takes a job id from a
//! person, a URL, a file name, the environment or sacct goes through here; these checks are
//! security-relevant (an id becomes a file name in root's spool, a path on an endpoint, an
//! argument of `sacct -j`), so the parser is strict and bounded.
//!
//! The forms, as Slurm prints them:
//! - `12345`: a job, by its own id;
//! - `12345_7`: task 7 of array job 12345 (the task's own id is another number: sacct's
//!   `JobIDRaw`);
//! - `12345+1`: component 1 of heterogeneous job 12345.
//!
//! Not one job, so not a [`JobId`]: a pending array's range `12345_[1-3]` as sacct prints
//! it, a step `12345.batch` / `12345.0`, anything with a sign, a space or a non-ASCII digit.

use std::fmt;

/// One job as Slurm names it. Every number in it is a `u32`, as Slurm's own are (`job_id`,
/// `array_task_id`, `het_job_offset` in `slurm.h`): at most 10 ASCII digits and at most
/// `u32::MAX` (4294967295), written without leading zeros (Slurm never prints them, and one
/// job then has one spelling: a name built from a parsed id is the name that was asked for).
/// A job's id is not 0 (Slurm numbers jobs from `FirstJobId`, at least 1); a task or a
/// component may be 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobId {
    /// `12345`: a job by its own id (an array task's or het component's own id too).
    Job(u32),
    /// `12345_7`: a task of an array job.
    ArrayTask { array: u32, task: u32 },
    /// `12345+1`: a component of a heterogeneous job (`+0` is its leader).
    HetComponent { job: u32, offset: u32 },
}

/// Why a text is not a [`JobId`]: it is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAJobId;

impl fmt::Display for NotAJobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a job id")
    }
}

impl std::error::Error for NotAJobId {}

/// The most digits one number of a job id has: `u32::MAX` is 4294967295.
pub const MAX_DIGITS: usize = 10;

/// One number of a job id: 1 to [`MAX_DIGITS`] ASCII digits, no leading zero (`0` alone is
/// zero), at most `u32::MAX`.
fn number(s: &str) -> Option<u32> {
    let b = s.as_bytes();
    let canonical = !b.is_empty()
        && b.len() <= MAX_DIGITS
        && b.iter().all(u8::is_ascii_digit)
        && (b.len() == 1 || b[0] != b'0');
    // Only ASCII digits reach `parse` (which would take a leading `+`).
    canonical.then(|| s.parse().ok()).flatten()
}

/// A job's own id: a [`number`] that is not 0.
fn job_number(s: &str) -> Option<u32> {
    number(s).filter(|&n| n != 0)
}

impl JobId {
    /// The one parser: `12345`, `12345_7` or `12345+1`, exactly (no space, no sign, no
    /// leading zero, no step, no range; see the type for the bounds).
    pub fn parse(s: &str) -> Result<JobId, NotAJobId> {
        let id = if let Some((array, task)) = s.split_once('_') {
            JobId::ArrayTask {
                array: job_number(array).ok_or(NotAJobId)?,
                task: number(task).ok_or(NotAJobId)?,
            }
        } else if let Some((job, offset)) = s.split_once('+') {
            JobId::HetComponent {
                job: job_number(job).ok_or(NotAJobId)?,
                offset: number(offset).ok_or(NotAJobId)?,
            }
        } else {
            JobId::Job(job_number(s).ok_or(NotAJobId)?)
        };
        Ok(id)
    }

    /// A job by its own id (`12345`), and nothing else: what a file name, an endpoint's
    /// path or `SLURM_JOB_ID` holds.
    pub fn own(s: &str) -> Option<u32> {
        match JobId::parse(s) {
            Ok(JobId::Job(n)) => Some(n),
            _ => None,
        }
    }

    /// A job or an array task (`12345`, `12345_7`): what `sbatch` prints and a user types
    /// to `report` or `jobs`; a het component is not one of these.
    pub fn job_or_task(s: &str) -> Option<JobId> {
        JobId::parse(s)
            .ok()
            .filter(|j| !matches!(j, JobId::HetComponent { .. }))
    }
}

impl std::str::FromStr for JobId {
    type Err = NotAJobId;

    fn from_str(s: &str) -> Result<JobId, NotAJobId> {
        JobId::parse(s)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobId::Job(n) => write!(f, "{n}"),
            JobId::ArrayTask { array, task } => write!(f, "{array}_{task}"),
            JobId::HetComponent { job, offset } => write!(f, "{job}+{offset}"),
        }
    }
}

/// The one raw-id rule: a job's own id (the name its recording is filed under, see
/// `store::paths`) from what sacct printed for it: `JobIDRaw` when it holds one, else the
/// `JobID` when that is a job by its own id. An array task (`12345_7`) or het component
/// (`12345+1`) has an own id that only `JobIDRaw` tells (the array's id names another task):
/// without it, `None`, as for anything else.
pub fn raw_id(job_id_raw: Option<&str>, job_id: &str) -> Option<u32> {
    job_id_raw
        .and_then(|r| JobId::own(r.trim()))
        .or_else(|| JobId::own(job_id.trim()))
}

/// What tells one job of sacct's answer from another: its own id ([`raw_id`]), else the
/// `JobID` as printed (a pending array's `12345_[1-3]` without `JobIDRaw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key<'a> {
    Raw(u32),
    Printed(&'a str),
}

impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Raw(n) => write!(f, "{n}"),
            Key::Printed(s) => f.write_str(s),
        }
    }
}

/// The [`Key`] of a job sacct printed with these `JobIDRaw` and `JobID`.
pub fn key<'a>(job_id_raw: Option<&str>, job_id: &'a str) -> Key<'a> {
    raw_id(job_id_raw, job_id).map_or(Key::Printed(job_id), Key::Raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<JobId> {
        JobId::parse(s).ok()
    }

    #[test]
    fn the_forms_slurm_prints_are_job_ids() {
        assert_eq!(p("12345"), Some(JobId::Job(12345)));
        assert_eq!(
            p("12345_7"),
            Some(JobId::ArrayTask {
                array: 12345,
                task: 7
            })
        );
        assert_eq!(
            p("12345_0"),
            Some(JobId::ArrayTask {
                array: 12345,
                task: 0
            })
        );
        assert_eq!(
            p("12345+0"),
            Some(JobId::HetComponent {
                job: 12345,
                offset: 0
            })
        );
        assert_eq!(
            p("12345+1"),
            Some(JobId::HetComponent {
                job: 12345,
                offset: 1
            })
        );
        assert_eq!(p("1"), Some(JobId::Job(1)));
        for s in ["12345", "12345_7", "12345+0", "4294967295", "1_4294967295"] {
            assert_eq!(p(s).unwrap().to_string(), s, "one spelling per job");
            assert_eq!(s.parse::<JobId>(), JobId::parse(s));
        }
    }

    #[test]
    fn a_pending_array_range_is_not_one_job() {
        for s in [
            "12345_[1-3]",
            "12345_[1-3%2]",
            "12345_[1,3]",
            "12345_*",
            "12345_",
        ] {
            assert_eq!(p(s), None, "{s}");
        }
    }

    #[test]
    fn a_step_is_not_a_job() {
        for s in [
            "12345.batch",
            "12345.0",
            "12345.extern",
            "12345_7.0",
            "12345+1.batch",
        ] {
            assert_eq!(p(s), None, "{s}");
        }
    }

    #[test]
    fn the_bounds_are_slurms_u32() {
        assert_eq!(p("4294967295"), Some(JobId::Job(u32::MAX)));
        // 10 digits, over u32::MAX.
        assert_eq!(p("4294967296"), None);
        assert_eq!(p("9999999999"), None);
        // 11 digits.
        assert_eq!(p("12345678901"), None);
        assert_eq!(p("99999999999999999999"), None);
        assert_eq!(p("1_4294967296"), None);
        assert_eq!(p("1+12345678901"), None);
        assert_eq!(p("4294967296_1"), None);
    }

    #[test]
    fn leading_zeros_and_zero_jobs_are_refused() {
        for s in [
            "012345",
            "00",
            "0",
            "0_1",
            "0+0",
            "1_07",
            "1+01",
            "0000000042",
        ] {
            assert_eq!(p(s), None, "{s}");
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for s in [
            "", " ", "_", "+", "_1", "+1", "1_", "1+", "+5", "-5", " 12345", "12345 ", "12345\n",
            "1_2_3", "1+2+3", "1_2+3", "1+2_3", "0x10", "1e3", "12x", "../etc", "1;ls", "1/2",
            "12345\0",
        ] {
            assert_eq!(p(s), None, "{s:?}");
        }
    }

    #[test]
    fn only_ascii_digits_are_digits() {
        // Arabic-Indic, full-width and Devanagari digits, and a superscript.
        for s in ["١٢٣", "１２３", "१२३", "12³", "1_١", "1+１"] {
            assert_eq!(p(s), None, "{s}");
        }
    }

    #[test]
    fn own_and_job_or_task_narrow_the_forms() {
        assert_eq!(JobId::own("12345"), Some(12345));
        assert_eq!(JobId::own("12345_7"), None);
        assert_eq!(JobId::own("12345+1"), None);
        assert_eq!(JobId::own("0"), None);
        assert_eq!(JobId::job_or_task("12345"), Some(JobId::Job(12345)));
        assert!(JobId::job_or_task("12345_7").is_some());
        assert_eq!(JobId::job_or_task("12345+1"), None);
        assert_eq!(JobId::job_or_task("12345_[1-3]"), None);
    }

    #[test]
    fn the_raw_id_is_jobidraw_else_a_plain_jobid() {
        assert_eq!(raw_id(Some("12350"), "12345_7"), Some(12350));
        assert_eq!(raw_id(Some(" 12350 "), "12345_7"), Some(12350));
        // A pending array: sacct prints the range, and the array's own id as JobIDRaw.
        assert_eq!(raw_id(Some("12345"), "12345_[1-3]"), Some(12345));
        assert_eq!(raw_id(None, "12345"), Some(12345));
        assert_eq!(raw_id(Some(""), "12345"), Some(12345));
        assert_eq!(raw_id(Some("x"), "12345"), Some(12345));
        // An array task's or het component's own id is not its array's or leader's.
        assert_eq!(raw_id(None, "12345_7"), None);
        assert_eq!(raw_id(Some(""), "12345+1"), None);
        assert_eq!(raw_id(None, "12345_[1-3]"), None);
        assert_eq!(raw_id(Some("12345678901"), "12345678901"), None);
    }

    #[test]
    fn the_key_falls_back_to_the_printed_id() {
        assert_eq!(key(Some("12350"), "12345_7"), Key::Raw(12350));
        assert_eq!(key(None, "12345_[1-3]"), Key::Printed("12345_[1-3]"));
        assert_eq!(key(None, "12345"), Key::Raw(12345));
        assert_eq!(key(Some("12350"), "12345_7").to_string(), "12350");
        assert_eq!(key(None, "12345_[1-3]").to_string(), "12345_[1-3]");
    }
}
