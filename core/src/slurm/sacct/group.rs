//! A multi-job answer's lines grouped into [`Record`]s as they arrive: a job is handed on
//! as soon as the next job's line shows its steps are all in, so only one job is ever held.
//!
//! sacct prints each job line followed by its step lines. A step line that does not follow
//! its own job (its job line missing — purged, or outside a chunk — or elsewhere in the
//! answer) is an orphan: counted, and dropped.

use super::columns::{Columns, Kept};
use super::Record;

/// What a grouped answer held besides its jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Lines that could not be parsed.
    pub skipped_lines: usize,
    /// Step lines without their job line.
    pub orphan_steps: usize,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        self.skipped_lines += o.skipped_lines;
        self.orphan_steps += o.orphan_steps;
    }
}

/// Feed it an answer's non-blank lines, header first.
pub struct Grouper {
    delimiter: char,
    kept: Kept,
    columns: Option<Columns>,
    open: Option<Record>,
    pub tally: Tally,
}

impl Grouper {
    pub fn new(delimiter: char, kept: Kept) -> Grouper {
        Grouper {
            delimiter,
            kept,
            columns: None,
            open: None,
            tally: Tally::default(),
        }
    }

    /// One line; returns the job it completed, if any.
    pub fn push(&mut self, raw: &str) -> Option<Record> {
        let Some(cols) = &mut self.columns else {
            self.columns = Some(Columns::new(raw, self.delimiter));
            return None;
        };
        let Some(line) = cols.line(raw, self.kept) else {
            self.tally.skipped_lines += 1;
            return None;
        };
        if line.step.is_none() {
            return self.open.replace(Record {
                job: line,
                steps: Vec::new(),
                skipped_lines: 0,
            });
        }
        let parent = line.job_id.split('.').next().unwrap_or("");
        match &mut self.open {
            Some(r) if r.job.job_id == parent => r.steps.push(line),
            _ => self.tally.orphan_steps += 1,
        }
        None
    }

    /// The end of the answer: the last job, if any.
    pub fn finish(&mut self) -> Option<Record> {
        self.open.take()
    }
}
