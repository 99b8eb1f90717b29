//! One answer's header, and each of its data lines split, repaired and typed by it.
//!
//! The header is read once per answer; a data line is split into borrowed values and looked
//! up by column position, so typing a line allocates only what the [`Line`] keeps. That is
//! what lets a window of a million jobs be parsed as it streams in.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use crate::fasthash::FastMap;

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

/// A name's (address, length) and its column.
type AddressSlot = ((usize, usize), Option<usize>);

/// Slots of [`Columns::by_address`].
const ADDRESS_SLOTS: usize = 251;

/// The columns of one sacct answer, by name.
#[derive(Debug, Clone)]
pub struct Columns {
    names: Vec<String>,
    index: FastMap<String, usize>,
    delimiter: char,
    times: Times,
    /// The current line's value spans (reused).
    spans: Vec<(usize, usize)>,
    /// Columns found by the address of the name asked for: [`Line::typed`] asks for the same
    /// ~40 names (the same `&'static str`s) on every line, and hashing them was a seventh of
    /// the parse.
    by_address: RefCell<Vec<Option<AddressSlot>>>,
    /// The names asked for while typing the last line, in order, with their columns; and how
    /// many the current line has asked. [`Line::typed`] asks in the same order line after
    /// line, so the `n`th name asked is first checked against the last line's `n`th: one
    /// comparison, where even the address cache cost a fifth of the line's typing.
    asked: RefCell<Vec<AddressSlot>>,
    at: Cell<usize>,
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
        Columns {
            names,
            index,
            delimiter,
            times: Times::default(),
            spans: Vec::new(),
            by_address: RefCell::new(vec![None; ADDRESS_SLOTS]),
            asked: RefCell::new(Vec::new()),
            at: Cell::new(0),
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

    /// The position of column `name`, or `None` when sacct printed no such column.
    fn column(&self, name: &'static str) -> Option<usize> {
        // A `'static` name's bytes never move or change: its address and length are it.
        let key = (name.as_ptr() as usize, name.len());
        let n = self.at.get();
        self.at.set(n + 1);
        let mut asked = self.asked.borrow_mut();
        match asked.get(n) {
            Some(&(k, i)) if k == key => return i,
            _ => {}
        }
        let i = self.by_address(name, key);
        if n < asked.len() {
            asked[n] = (key, i);
        } else {
            asked.push((key, i));
        }
        i
    }

    /// [`column`](Self::column) when the order of names asked changed.
    fn by_address(&self, name: &'static str, key: (usize, usize)) -> Option<usize> {
        let slot = (key.0 >> 1) % ADDRESS_SLOTS;
        let mut cache = self.by_address.borrow_mut();
        if let Some((k, i)) = cache[slot] {
            if k == key {
                return i;
            }
        }
        let i = self.index.get(name).copied();
        cache[slot] = Some((key, i));
        i
    }

    /// The line whose `i`th value is `val(i)`.
    fn typed<'v>(&self, val: &impl Fn(usize) -> &'v str, kept: Kept) -> Option<Line> {
        self.at.set(0);
        let get = |k: &'static str| -> Option<&'v str> { self.column(k).map(val) };
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
                .filter_map(|k| get(k).map(|v| (k.to_string(), v.to_string())))
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
