//! One answer's header, and each of its records typed by it.
//!
//! The header is read once per answer; a record's values are borrowed where
//! [`records`](super::records) cut them and looked up by column position, so typing a line
//! allocates only what the [`Line`] keeps. That is what lets a window of a million jobs be
//! parsed as it streams in.

use std::collections::BTreeMap;

use crate::fasthash::FastMap;

use super::line::Col;
use super::times::Times;
use super::Line;

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

/// The columns of one sacct answer, by name.
#[derive(Debug, Clone)]
pub struct Columns {
    names: Vec<String>,
    index: FastMap<String, usize>,
    times: Times,
    /// Each [`Col`]'s position, by its number.
    by_col: Vec<Option<usize>>,
}

impl Columns {
    /// From the answer's header (see [`records`](super::records)). A name printed twice is
    /// found at its last position.
    pub fn new(names: Vec<String>) -> Columns {
        let mut index = FastMap::default();
        for (i, n) in names.iter().enumerate() {
            index.insert(n.clone(), i);
        }
        let by_col = Col::NAMES.iter().map(|n| index.get(*n).copied()).collect();
        Columns {
            by_col,
            names,
            index,
            times: Times::default(),
        }
    }

    /// One record, its values at `spans` (cut by [`records`](super::records)), typed; `None`
    /// when it cannot be read (a field count that does not match the header, or no JobID):
    /// the caller counts it as skipped.
    pub fn line(&self, raw: &str, spans: &[(usize, usize)], kept: Kept) -> Option<Line> {
        if spans.len() != self.names.len() {
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
}
