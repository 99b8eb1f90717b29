//! An answer's text into records: one job's ([`parse`]) or many jobs' ([`parse_many`]).

use serde::Serialize;

use super::columns::{Columns, Kept};
use super::group::{Grouper, Rejoin};
use super::{Line, Record};

/// Parses `sacct --parsable2` output *with* its header line. Lines of a different job than
/// the first (an array's other tasks, when asked for `12345_*`) are kept apart by JobIDRaw
/// only for the first job; the rest are ignored.
pub fn parse(text: &str, delimiter: char) -> Option<Record> {
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
    Some(Record {
        job,
        steps,
        skipped_lines: skipped,
    })
}

/// Every job of a multi-job answer (`-S/-E` windows), each with the step lines that follow
/// it (see [`group`](super::group): a step line away from its job line is an orphan, dropped and counted);
/// unparsable lines (a field count that does not match the header, even after repair) are
/// counted, never fatal. Jobs keep sacct's order.
pub fn parse_many(text: &str, delimiter: char) -> Batch {
    let mut g = Grouper::new(delimiter, Kept::All);
    let mut records: Vec<Record> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| g.push(l))
        .collect();
    records.extend(g.finish());
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
    pub records: Vec<Record>,
    /// Lines that could not be parsed.
    pub skipped_lines: usize,
    /// Step lines without their job line.
    pub orphan_steps: usize,
}

/// The header, then each line split, repaired where the `|` fallback split a user-typed
/// field, and typed. Returns the lines and how many were skipped.
fn parse_lines(text: &str, delimiter: char) -> (Vec<Line>, usize) {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let Some(first) = lines.next() else {
        return (Vec::new(), 0);
    };
    let mut cols = Columns::new(first, delimiter);
    let mut rejoin = Rejoin::new(delimiter, cols.width());
    let mut out = Vec::new();
    let mut skipped = 0;
    for l in lines {
        let Some(l) = rejoin.push(l) else { continue };
        match cols.line(&l, Kept::All) {
            Some(line) => out.push(line),
            None => skipped += 1,
        }
    }
    rejoin.finish();
    (out, skipped + rejoin.skipped)
}
