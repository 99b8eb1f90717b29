//! One answer's header, and each of its data lines split, repaired and typed by it.
//!
//! The header is read once per answer; a data line is split into borrowed values and looked
//! up by column position, so typing a line allocates only what the [`Line`] keeps. That is
//! what lets a window of a million jobs be parsed as it streams in.

use std::collections::BTreeMap;

use crate::fasthash::FastMap;

use super::line::Col;
use super::times::Times;
use super::{Line, DELIMITER};

/// Which of sacct's raw values a typed [`Line`] keeps in [`Line::fields`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Every column (one job's record, shown whole by `report --json`).
    All,
    /// Only the job line's [`WINDOW_KEPT_FIELDS`](super::WINDOW_KEPT_FIELDS), none of a step
    /// line's: a window of many jobs keeps the typed members and nothing else it would have
    /// to allocate per line.
    Ids,
}

/// Where each of `raw`'s values lies (byte ranges), split at `delimiter`: by bytes when it
/// is ASCII (always: the unit separator or `|`), which a `char` pattern's searcher is several
/// times slower at; into a buffer reused from line to line (appended: `spans` may hold
/// other lines' before).
pub(super) fn split_spans(raw: &str, delimiter: char, spans: &mut Vec<(usize, usize)>) {
    let mut start = 0;
    if delimiter.is_ascii() {
        let d = delimiter as u8;
        for (i, &b) in raw.as_bytes().iter().enumerate() {
            if b == d {
                spans.push((start, i));
                start = i + 1;
            }
        }
    } else {
        for (i, m) in raw.match_indices(delimiter) {
            spans.push((start, i));
            start = i + m.len();
        }
    }
    spans.push((start, raw.len()));
}

/// The columns of one sacct answer, by name.
#[derive(Debug, Clone)]
pub struct Columns {
    names: Vec<String>,
    index: FastMap<String, usize>,
    delimiter: char,
    times: Times,
    /// The current line's value spans (reused).
    spans: Vec<(usize, usize)>,
    /// Each [`Col`]'s position, by its number.
    by_col: Vec<Option<usize>>,
}

impl Columns {
    /// From the answer's first non-blank line. A name printed twice is found at its last
    /// position.
    pub fn new(header: &str, delimiter: char) -> Columns {
        let names: Vec<String> = header
            .split(delimiter)
            .map(|n| n.trim().to_string())
            .collect();
        let mut index = FastMap::default();
        for (i, n) in names.iter().enumerate() {
            index.insert(n.clone(), i);
        }
        let by_col = Col::NAMES.iter().map(|n| index.get(*n).copied()).collect();
        Columns {
            by_col,
            names,
            index,
            delimiter,
            times: Times::default(),
            spans: Vec::new(),
        }
    }

    /// How many columns the header names.
    pub fn width(&self) -> usize {
        self.names.len()
    }

    /// [`width`](Self::width) of the columns `header` would name, without reading them.
    pub fn header_width(header: &str, delimiter: char) -> usize {
        header.split(delimiter).count()
    }

    /// One data line, typed; `None` when it cannot be read (a field count that does not match
    /// the header even after [`repair`](Self::repair), or no JobID): the caller counts it as
    /// skipped.
    pub fn line(&mut self, raw: &str, kept: Kept) -> Option<Line> {
        let mut spans = std::mem::take(&mut self.spans);
        spans.clear();
        split_spans(raw, self.delimiter, &mut spans);
        let line = self.line_split(raw, &spans, kept);
        self.spans = spans;
        line
    }

    /// [`line`](Self::line) of a line already split by [`split_spans`] (on another thread:
    /// see [`pipeline`](super::pipeline)).
    pub fn line_split(&self, raw: &str, spans: &[(usize, usize)], kept: Kept) -> Option<Line> {
        let n = spans.len();
        if n > self.names.len() && self.delimiter != DELIMITER {
            let vals: Vec<&str> = spans.iter().map(|&(a, b)| &raw[a..b]).collect();
            let vals = self.repair(&vals)?;
            return self.typed(&|i| vals[i].as_str(), kept);
        }
        if n != self.names.len() {
            return None;
        }
        self.typed(&|i| &raw[spans[i].0..spans[i].1], kept)
    }

    /// The line whose `i`th value is `val(i)`.
    fn typed<'v>(&self, val: &impl Fn(usize) -> &'v str, kept: Kept) -> Option<Line> {
        let get = |c: Col| -> Option<&'v str> { self.by_col[c as usize].map(val) };
        let mut line = Line::typed(&get, &|s| self.times.parse(s))?;
        line.fields = match kept {
            Kept::All => self
                .names
                .iter()
                .enumerate()
                .map(|(i, k)| (k.clone(), val(i).to_string()))
                .collect(),
            Kept::Ids if line.step.is_some() => BTreeMap::new(),
            Kept::Ids => super::WINDOW_KEPT_FIELDS
                .iter()
                .filter_map(|k| {
                    let v = val(*self.index.get(*k)?);
                    Some((k.to_string(), v.to_string()))
                })
                .collect(),
        };
        Some(line)
    }

    /// With the `|` fallback a `|` typed into a job name or work dir splits one field in two.
    /// Rejoin the surplus at the one user-typed column that makes the line consistent (a work
    /// dir that is absolute, a JobID that is an id); `None` when no single choice fits.
    fn repair(&self, vals: &[&str]) -> Option<Vec<String>> {
        let extra = vals.len() - self.names.len();
        let idx = |name: &str| self.names.iter().position(|h| h == name);
        let fits = |v: &[String]| {
            let id_ok = idx("JobID").is_none_or(|i| {
                v[i].chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._+".contains(c))
            });
            let wd_ok = idx("WorkDir").is_none_or(|i| v[i].is_empty() || v[i].starts_with('/'));
            id_ok && wd_ok
        };
        let mut found = None;
        for col in ["JobName", "WorkDir"] {
            let Some(i) = idx(col) else { continue };
            let mut v: Vec<String> = vals[..i].iter().map(|s| s.to_string()).collect();
            v.push(vals[i..=i + extra].join(&self.delimiter.to_string()));
            v.extend(vals[i + extra + 1..].iter().map(|s| s.to_string()));
            if fits(&v) {
                if found.is_some() {
                    return None; // ambiguous
                }
                found = Some(v);
            }
        }
        found
    }
}
