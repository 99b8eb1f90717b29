//! An answer's text into records: one job's ([`parse`]) or many jobs' ([`parse_many`]).
//! `delimiter` is the one the answer was asked with (see [`records`](super::records): no
//! field a user typed may hold it).

use serde::Serialize;

use super::columns::{Columns, Kept};
use super::group::Grouper;
use super::records::{Cut, Records};
use super::{JobAccounting, Line};

/// Parses `sacct --parsable2` output *with* its header line. Lines of a different job than
/// the first (an array's other tasks, when asked for `12345_*`) are kept apart by JobIDRaw
/// only for the first job; the rest are ignored.
pub fn parse(text: &str, delimiter: &str) -> Option<JobAccounting> {
    let (lines, skipped) = parse_lines(text, delimiter);
    let mut job: Option<Line> = None;
    let mut steps = Vec::new();
    for line in lines {
        match (&job, &line.step) {
            (None, None) => job = Some(line),
            (Some(j), Some(_)) if line.job_id.starts_with(&format!("{}.", j.job_id)) => {
                steps.push(line)
            }
            (None, Some(_)) => steps.push(line),
            _ => {}
        }
    }
    let job = job?;
    steps.retain(|s| s.job_id.starts_with(&format!("{}.", job.job_id)));
    Some(JobAccounting {
        job,
        steps,
        skipped_lines: skipped,
    })
}

/// Every job of a multi-job answer (`-S/-E` windows), each with the step lines that follow
/// it (see [`group`](super::group): a step line away from its job line is an orphan, dropped
/// and counted); unreadable records are counted, never fatal. Jobs keep sacct's order.
pub fn parse_many(text: &str, delimiter: &str) -> Batch {
    let mut g = Grouper::new(delimiter, Kept::All);
    let mut records = Vec::new();
    g.push(text.as_bytes(), &mut |r| records.push(r));
    g.finish(&mut |r| records.push(r));
    let tally = g.tally();
    Batch {
        records,
        skipped_lines: tally.skipped_lines,
        orphan_steps: tally.orphan_steps,
    }
}

/// What [`parse_many`] and [`Query::window`](super::Query::window) return.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Batch {
    pub records: Vec<JobAccounting>,
    /// Records that could not be read.
    pub skipped_lines: usize,
    /// Step lines without their job line.
    pub orphan_steps: usize,
}

/// The header, then each record typed. Returns the lines and how many records were skipped.
fn parse_lines(text: &str, delimiter: &str) -> (Vec<Line>, usize) {
    let mut records = Records::new(delimiter);
    let mut columns: Option<Columns> = None;
    let mut out = Vec::new();
    let mut skipped = 0;
    let mut on_cut = |cut: Cut<'_>| match cut {
        Cut::Header(names) => columns = Some(Columns::new(names)),
        Cut::Record(text, spans) => {
            match columns
                .as_ref()
                .and_then(|c| c.line(text, spans, Kept::All))
            {
                Some(line) => out.push(line),
                None => skipped += 1,
            }
        }
    };
    records.push(text.as_bytes(), &mut on_cut);
    records.finish(&mut on_cut);
    (out, skipped + records.skipped)
}
