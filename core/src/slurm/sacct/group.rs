//! A multi-job answer's lines grouped into [`Record`]s as they arrive: a job is handed on
//! as soon as the next job's line shows its steps are all in, so only one job is ever held.
//!
//! sacct prints each job line followed by its step lines. A step line that does not follow
//! its own job (its job line missing — purged, or outside a chunk — or elsewhere in the
//! answer) is an orphan: counted, and dropped.

use std::borrow::Cow;

use super::columns::{Columns, Kept};
use super::{Line, Record, DELIMITER};
use crate::slurm::units::split_once_ascii;

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

/// Most physical lines one record is rejoined from (a field holds a few newlines at most).
const MAX_JOINED: usize = 16;

/// Rejoins a record that a newline typed into a field (a job name, work dir, SubmitLine or
/// AdminComment) split over several physical lines: with the unit separator as delimiter, a
/// line short of fields is held and the short lines after it appended (`\n` between) until
/// the record has its fields. A held line that nothing continues cannot be parsed: counted
/// in `skipped`. Full lines pass through without a copy.
pub struct Rejoin {
    delimiter: char,
    width: usize,
    pending: Option<String>,
    joined: usize,
    pub skipped: usize,
}

impl Rejoin {
    pub fn new(delimiter: char, width: usize) -> Rejoin {
        Rejoin {
            delimiter,
            width,
            pending: None,
            joined: 0,
            skipped: 0,
        }
    }

    /// Fewer fields than the header: counted on bytes (the unit separator is ASCII), since
    /// every line of a 10⁶-job answer passes here.
    fn short(&self, s: &str) -> bool {
        self.delimiter == DELIMITER
            && s.bytes().filter(|&b| b == DELIMITER as u8).count() + 1 < self.width
    }

    /// One physical line; the record to parse, when one is complete.
    pub fn push<'a>(&mut self, raw: &'a str) -> Option<Cow<'a, str>> {
        if let Some(mut p) = self.pending.take() {
            if self.short(raw) && self.joined < MAX_JOINED {
                p.push('\n');
                p.push_str(raw);
                self.joined += 1;
                if self.short(&p) {
                    self.pending = Some(p);
                    return None;
                }
                return Some(Cow::Owned(p));
            }
            self.skipped += 1;
        }
        self.joined = 0;
        if self.short(raw) {
            self.pending = Some(raw.to_string());
            return None;
        }
        Some(Cow::Borrowed(raw))
    }

    /// The end of the answer: a held line left over is skipped.
    pub fn finish(&mut self) {
        if self.pending.take().is_some() {
            self.skipped += 1;
        }
    }
}

/// What a physical line of an answer is once [`Lines`] has read it.
pub enum Whole<'a> {
    /// The answer's first line: its column names.
    Header(&'a str),
    /// A data record, whole (rejoined where a newline had split it).
    Record(Cow<'a, str>),
}

/// The text half of grouping: an answer's non-blank physical lines, header first, into its
/// header and whole records. Needs no typing, so it can run ahead of [`Jobs`] on a thread of
/// its own (see [`pipeline`](super::pipeline)).
pub struct Lines {
    delimiter: char,
    rejoin: Option<Rejoin>,
}

impl Lines {
    pub fn new(delimiter: char) -> Lines {
        Lines {
            delimiter,
            rejoin: None,
        }
    }

    /// One physical line; what it completed, if anything.
    pub fn push<'a>(&mut self, raw: &'a str) -> Option<Whole<'a>> {
        let Some(rejoin) = &mut self.rejoin else {
            let width = Columns::header_width(raw, self.delimiter);
            self.rejoin = Some(Rejoin::new(self.delimiter, width));
            return Some(Whole::Header(raw));
        };
        rejoin.push(raw).map(Whole::Record)
    }

    /// Physical lines that could not be made into a record so far.
    pub fn skipped(&self) -> usize {
        self.rejoin.as_ref().map_or(0, |r| r.skipped)
    }

    /// The end of the answer: a held line left over is skipped.
    pub fn finish(&mut self) {
        if let Some(r) = &mut self.rejoin {
            r.finish();
        }
    }
}

/// The typed half of grouping: an answer's whole records, typed by its header and grouped
/// into jobs.
pub struct Jobs {
    columns: Columns,
    kept: Kept,
    open: Option<Record>,
    /// Records that could not be typed, and orphan steps (rejoin's skips are [`Lines`]').
    pub tally: Tally,
}

impl Jobs {
    pub fn new(header: &str, delimiter: char, kept: Kept) -> Jobs {
        Jobs {
            columns: Columns::new(header, delimiter),
            kept,
            open: None,
            tally: Tally::default(),
        }
    }

    /// One whole record; returns the job it completed, if any.
    pub fn push(&mut self, record: &str) -> Option<Record> {
        let line = self.columns.line(record, self.kept);
        self.group(line)
    }

    /// [`push`](Self::push) of a record already split by
    /// [`split_spans`](super::columns::split_spans).
    pub fn push_split(&mut self, record: &str, spans: &[(usize, usize)]) -> Option<Record> {
        let line = self.columns.line_split(record, spans, self.kept);
        self.group(line)
    }

    fn group(&mut self, line: Option<Line>) -> Option<Record> {
        let Some(line) = line else {
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
        let parent = split_once_ascii(&line.job_id, b'.').map_or(&*line.job_id, |(p, _)| p);
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

/// [`Lines`] then [`Jobs`] on one thread: feed it an answer's non-blank lines, header first.
pub struct Grouper {
    kept: Kept,
    lines: Lines,
    jobs: Option<Jobs>,
}

impl Grouper {
    pub fn new(delimiter: char, kept: Kept) -> Grouper {
        Grouper {
            kept,
            lines: Lines::new(delimiter),
            jobs: None,
        }
    }

    /// One line; returns the job it completed, if any.
    pub fn push(&mut self, raw: &str) -> Option<Record> {
        match self.lines.push(raw)? {
            Whole::Header(h) => {
                self.jobs = Some(Jobs::new(h, self.lines.delimiter, self.kept));
                None
            }
            Whole::Record(r) => self.jobs.as_mut()?.push(&r),
        }
    }

    /// The end of the answer: the last job, if any.
    pub fn finish(&mut self) -> Option<Record> {
        self.lines.finish();
        self.jobs.as_mut()?.finish()
    }

    /// What the answer held besides its jobs, so far.
    pub fn tally(&self) -> Tally {
        let mut t = self.jobs.as_ref().map_or_else(Tally::default, |j| j.tally);
        t.skipped_lines += self.lines.skipped();
        t
    }
}
