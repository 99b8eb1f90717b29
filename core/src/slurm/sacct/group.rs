//! A multi-job answer's records grouped into [`JobAccounting`]s as they arrive: a job is handed on
//! as soon as the next job's line shows its steps are all in, so only one job is ever held.
//!
//! sacct prints each job line followed by its step lines. A step line that does not follow
//! its own job (its job line missing — purged, or outside a chunk — or elsewhere in the
//! answer) is an orphan: counted, and dropped.

use super::columns::{Columns, Kept};
use super::records::{Cut, Records};
use super::JobAccounting;
use crate::slurm::units::split_once_ascii;

/// What a grouped answer held besides its jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Records that could not be read.
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

/// The typed half of grouping: an answer's records (cut by [`records`](super::records)),
/// typed by its header and grouped into jobs.
pub struct Jobs {
    columns: Columns,
    kept: Kept,
    open: Option<JobAccounting>,
    /// Records that could not be typed, and orphan steps (the cutter's skips are its own).
    pub tally: Tally,
}

impl Jobs {
    pub fn new(names: Vec<String>, kept: Kept) -> Jobs {
        Jobs {
            columns: Columns::new(names),
            kept,
            open: None,
            tally: Tally::default(),
        }
    }

    /// One record and its values' spans; returns the job it completed, if any.
    pub fn push(&mut self, record: &str, spans: &[(usize, usize)]) -> Option<JobAccounting> {
        let Some(line) = self.columns.line(record, spans, self.kept) else {
            self.tally.skipped_lines += 1;
            return None;
        };
        if line.step.is_none() {
            return self.open.replace(JobAccounting {
                job: line,
                steps: Vec::new(),
                skipped_lines: 0,
            });
        }
        let parent = split_once_ascii(&line.job_id, b'.').map_or(&*line.job_id, |(p, _)| p);
        match &mut self.open {
            Some(r) if r.job.job_id == parent => r.steps.push(line),
            _ => self.tally.orphan_steps += 1,
        }
        None
    }

    /// The end of the answer: the last job, if any.
    pub fn finish(&mut self) -> Option<JobAccounting> {
        self.open.take()
    }
}

/// [`Records`] then [`Jobs`] on one thread: feed it an answer's text.
pub struct Grouper {
    kept: Kept,
    records: Records,
    jobs: Option<Jobs>,
}

impl Grouper {
    pub fn new(delimiter: &str, kept: Kept) -> Grouper {
        Grouper {
            kept,
            records: Records::new(delimiter),
            jobs: None,
        }
    }

    /// The next bytes of the answer; each job they complete goes to `on_job`.
    pub fn push(&mut self, bytes: &[u8], on_job: &mut dyn FnMut(JobAccounting)) {
        let (kept, jobs) = (self.kept, &mut self.jobs);
        self.records
            .push(bytes, &mut |cut| Self::cut(kept, jobs, cut, on_job));
    }

    /// The end of the answer: the last job, if any, goes to `on_job`.
    pub fn finish(&mut self, on_job: &mut dyn FnMut(JobAccounting)) {
        let (kept, jobs) = (self.kept, &mut self.jobs);
        self.records
            .finish(&mut |cut| Self::cut(kept, jobs, cut, on_job));
        if let Some(r) = self.jobs.as_mut().and_then(Jobs::finish) {
            on_job(r);
        }
    }

    fn cut(
        kept: Kept,
        jobs: &mut Option<Jobs>,
        cut: Cut<'_>,
        on_job: &mut dyn FnMut(JobAccounting),
    ) {
        match cut {
            Cut::Header(names) => *jobs = Some(Jobs::new(names, kept)),
            Cut::Record(text, spans) => {
                if let Some(r) = jobs.as_mut().and_then(|j| j.push(text, spans)) {
                    on_job(r);
                }
            }
        }
    }

    /// What the answer held besides its jobs, so far.
    pub fn tally(&self) -> Tally {
        let mut t = self.jobs.as_ref().map_or_else(Tally::default, |j| j.tally);
        t.skipped_lines += self.records.skipped;
        t
    }
}
