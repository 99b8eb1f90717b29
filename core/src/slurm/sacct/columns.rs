//! One answer's header, and each of its data lines split, repaired and typed by it.
//!
//! The header is read once per answer; a data line is split into borrowed values and looked
//! up by column position, so typing a line allocates only what the [`Line`] keeps. That is
//! what lets a window of a million jobs be parsed as it streams in.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use super::{Line, DELIMITER};

/// Which of sacct's raw values a typed [`Line`] keeps in [`Line::fields`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Every column (one job's record, shown whole by `report --json`).
    All,
    /// Only [`WINDOW_KEPT_FIELDS`](super::WINDOW_KEPT_FIELDS): a window of many jobs keeps
    /// the typed members and nothing else it would have to hold per job.
    Ids,
}

/// FNV-1a: the column index is looked up ~40 times a line with short keys, where SipHash's
/// set-up dominates. Not exposed to untrusted keys' adversarial choice in any way that
/// matters: the keys are sacct's header names.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// The columns of one sacct answer, by name.
#[derive(Debug, Clone)]
pub struct Columns {
    names: Vec<String>,
    index: HashMap<String, usize, BuildHasherDefault<Fnv>>,
    delimiter: char,
}

impl Columns {
    /// From the answer's first non-blank line. A name printed twice is found at its last
    /// position.
    pub fn new(header: &str, delimiter: char) -> Columns {
        let names: Vec<String> = header
            .split(delimiter)
            .map(|n| n.trim().to_string())
            .collect();
        let mut index = HashMap::default();
        for (i, n) in names.iter().enumerate() {
            index.insert(n.clone(), i);
        }
        Columns {
            names,
            index,
            delimiter,
        }
    }

    /// One data line, typed; `None` when it cannot be read (a field count that does not match
    /// the header even after [`repair`], or no JobID): the caller counts it as skipped.
    pub fn line(&self, raw: &str, kept: Kept) -> Option<Line> {
        let mut vals: Vec<Cow<str>> = raw.split(self.delimiter).map(Cow::Borrowed).collect();
        if vals.len() > self.names.len() && self.delimiter != DELIMITER {
            vals = self.repair(&vals)?;
        }
        if vals.len() != self.names.len() {
            return None;
        }
        let vals = &vals;
        let get = |k: &str| -> Option<&str> { self.index.get(k).map(|&i| vals[i].as_ref()) };
        let mut line = Line::typed(&get)?;
        line.fields = match kept {
            Kept::All => self
                .names
                .iter()
                .zip(vals)
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
            Kept::Ids => super::WINDOW_KEPT_FIELDS
                .iter()
                .filter_map(|k| get(k).map(|v| (k.to_string(), v.to_string())))
                .collect::<BTreeMap<_, _>>(),
        };
        Some(line)
    }

    /// With the `|` fallback a `|` typed into a job name or work dir splits one field in two.
    /// Rejoin the surplus at the one user-typed column that makes the line consistent (a work
    /// dir that is absolute, a JobID that is an id); `None` when no single choice fits.
    fn repair<'a>(&self, vals: &[Cow<'a, str>]) -> Option<Vec<Cow<'a, str>>> {
        let extra = vals.len() - self.names.len();
        let idx = |name: &str| self.names.iter().position(|h| h == name);
        let fits = |v: &[Cow<str>]| {
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
            let mut v: Vec<Cow<str>> = vals[..i].to_vec();
            v.push(Cow::Owned(
                vals[i..=i + extra].join(&self.delimiter.to_string()),
            ));
            v.extend_from_slice(&vals[i + extra + 1..]);
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
